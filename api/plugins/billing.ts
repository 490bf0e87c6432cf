// app.billing: the Stripe SDK of this deployment (core/billing/stripe-client.ts).
// In the sandbox, events the sandbox emits (a paid checkout, a cancelled
// subscription) are signed with the webhook secret and POSTed to this app's
// own /api/billing/webhook, so they take exactly the production path.
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type Stripe from 'stripe';
import { createStripe, type StripeHandle } from '../../core/billing/stripe-client.ts';

declare module 'fastify' {
  interface FastifyInstance {
    billing: StripeHandle;
  }
}

async function billingPlugin(app: FastifyInstance) {
  const deliver = async (event: Stripe.Event) => {
    const payload = JSON.stringify(event);
    const signature = app.billing
      .stripe()
      .webhooks.generateTestHeaderString({ payload, secret: app.config.billing.stripe.webhookSecret });
    const response = await app.inject({
      method: 'POST',
      url: '/api/billing/webhook',
      headers: { 'content-type': 'application/json', 'stripe-signature': signature },
      payload,
    });
    if (response.statusCode !== 200) {
      app.log.warn(
        { status: response.statusCode, type: event.type, eventId: event.id },
        'billing sandbox: webhook delivery refused',
      );
    }
  };
  app.decorate('billing', createStripe(app.config, app.db, deliver));
}

export default fp(billingPlugin, { name: 'billing' });
