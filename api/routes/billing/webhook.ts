// POST /api/billing/webhook: Stripe's events. The signature is checked over
// the exact bytes received (the SDK's constructEvent, 5-minute tolerance,
// and as far into the future); a bad or missing one is 400 invalid_signature
// and nothing is stored. A good event is stored
// once by its id and answered 200 at once; the billing.webhook job applies it,
// so a slow or failing handler never makes Stripe retry, and a retried
// delivery never applies twice.
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type Stripe from 'stripe';
import { z } from 'zod';
import { storeInboundEvent } from '../../../core/billing/events.ts';
import { HANDLED_STRIPE_EVENTS, tenantOfStripeEvent } from '../../../core/billing/stripe-events.ts';
import { storableJson } from '../../../core/storable.ts';
import { PlatformError, PlatformHttpError } from '../../errors.ts';
import { received, WebhookReceived } from './received.ts';

const SIGNATURE_TOLERANCE_S = 300;
const MAX_EVENT_BYTES = 512 * 1024;

const stripeWebhookRoutes: FastifyPluginAsyncZod = async (app) => {
  // This plugin's own JSON parser keeps the raw bytes: the signature covers them exactly.
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser(
    'application/json',
    { parseAs: 'buffer', bodyLimit: MAX_EVENT_BYTES },
    (_request, body, done) => done(null, body),
  );

  app.post(
    '/api/billing/webhook',
    {
      schema: {
        operationId: 'receiveStripeWebhook',
        tags: ['billing'],
        summary: 'Stripe webhook: subscription lifecycle events (signature-checked, applied by a job)',
        description: `Signed by Stripe (Stripe-Signature over the raw JSON body, ${SIGNATURE_TOLERANCE_S} s tolerance). Handled: ${[...HANDLED_STRIPE_EVENTS].join(', ')}; other types are stored and ignored.`,
        security: [{ StripeSignature: [] }],
        // Checked by the handler, so a missing one answers invalid_signature like a wrong one.
        headers: z.object({
          'stripe-signature': z.string().max(4096).optional().describe('Required: t=<unix time>,v1=<HMAC-SHA256>'),
        }),
        body: z.unknown().describe('The Stripe Event as JSON, exactly as sent'),
        response: {
          200: WebhookReceived,
          400: PlatformError,
          413: PlatformError,
          415: PlatformError,
          503: PlatformError,
        },
      },
    },
    async (request) => {
      const raw = request.body;
      if (!Buffer.isBuffer(raw))
        throw new PlatformHttpError(415, 'unsupported_media_type', 'Send the event as application/json.');
      if (app.config.billing.mode === 'disabled') {
        throw new PlatformHttpError(
          503,
          'billing_not_configured',
          'Billing is not configured on this deployment (STRIPE_SECRET_KEY, STRIPE_WEBHOOK_SECRET).',
        );
      }
      const header = request.headers['stripe-signature'];
      if (!header)
        throw new PlatformHttpError(
          400,
          'invalid_signature',
          'Send the Stripe-Signature header Stripe signs each event with.',
        );
      // The SDK checks a timestamp's age only; one from the future is refused as well.
      const signedAt = Number(/(?:^|,)t=(\d{1,12})(?:,|$)/.exec(header)?.[1]);
      if (Number.isFinite(signedAt) && signedAt > Date.now() / 1000 + SIGNATURE_TOLERANCE_S) {
        request.log.warn('stripe webhook refused: signed in the future');
        throw new PlatformHttpError(
          400,
          'invalid_signature',
          `The Stripe-Signature timestamp is more than ${SIGNATURE_TOLERANCE_S} s in the future.`,
        );
      }
      let event: Stripe.Event;
      try {
        // Past the input guard (its bytes are read here): a NUL or a lone
        // surrogate is mended, so the event is stored once, not refused at every delivery.
        event = storableJson(
          app.billing
            .stripe()
            .webhooks.constructEvent(raw, header, app.config.billing.stripe.webhookSecret, SIGNATURE_TOLERANCE_S),
        );
      } catch (error) {
        request.log.warn({ reason: (error as Error).message }, 'stripe webhook refused: bad signature');
        throw new PlatformHttpError(
          400,
          'invalid_signature',
          'The Stripe-Signature header does not match this body, secret and time.',
        );
      }
      if (typeof event?.id !== 'string' || typeof event.type !== 'string' || typeof event.data?.object !== 'object') {
        throw new PlatformHttpError(400, 'invalid_request', 'The body is not a Stripe event (id, type, data.object).');
      }
      const tenantId = await tenantOfStripeEvent(app.db, event);
      const stored = await storeInboundEvent(
        app.jobs,
        app.db,
        {
          provider: 'stripe',
          eventId: event.id,
          type: event.type,
          tenantId,
          createdAt: new Date(event.created * 1000),
          payload: event,
        },
        HANDLED_STRIPE_EVENTS.has(event.type) ? undefined : 'unhandled_type',
      );
      request.log.info(
        { eventId: event.id, type: event.type, tenantId, duplicate: stored.duplicate, jobId: stored.jobId },
        'stripe event received',
      );
      return received(stored);
    },
  );
};

export default stripeWebhookRoutes;
