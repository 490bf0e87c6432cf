// Billing with Stripe (Tenant + Admin): checkout sessions for Pro and
// Enterprise, the customer portal, and one more agent slot. Each answers a
// URL for the person (never with a token in it) or the new slot count; the
// plan itself changes when Stripe's event reaches /api/billing/webhook.
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { addAgentSlot, BillingRefusal, openPortal, startCheckout } from '../../../core/billing/checkout.ts';
import { sql } from '../../../core/db/pool.ts';
import { PLAN_NAMES } from '../../../core/plans.ts';
import { PlatformError, PlatformHttpError } from '../../errors.ts';
import { TenantHeaders } from '../../plugins/tenant.ts';

const CheckoutResult = z
  .object({
    url: z.url().describe('Stripe Checkout page for the person to pay on'),
    sessionId: z.string(),
  })
  .meta({ id: 'BillingCheckoutSession' });
const PortalResult = z
  .object({ url: z.url().describe('Stripe customer portal for payment methods, invoices and cancelling') })
  .meta({ id: 'BillingPortalSession' });
const AddonResult = z
  .object({
    subscriptionId: z.string(),
    agentSlots: z.object({ plan: z.enum(PLAN_NAMES), included: z.int(), addons: z.int(), used: z.int() }),
  })
  .meta({ id: 'BillingAgentAddon' });
const AddonHeaders = TenantHeaders.extend({
  'idempotency-key': z
    .string()
    .min(8)
    .max(200)
    .optional()
    .describe('Send one to make a retried purchase buy one slot, not two'),
});

const refused = (error: unknown): never => {
  if (error instanceof BillingRefusal) throw new PlatformHttpError(error.status, error.code, error.message);
  throw error;
};

const stripeBillingRoutes: FastifyPluginAsyncZod = async (app) => {
  const admin = { onRequest: app.requireUser, preValidation: app.requireTenant('admin') };
  const security = [{ PlatformJWT: [] }];
  const errors = {
    400: PlatformError,
    401: PlatformError,
    403: PlatformError,
    404: PlatformError,
    409: PlatformError,
    502: PlatformError,
    503: PlatformError,
  };
  const deps = () => ({ db: app.db, config: app.config, stripe: app.billing.stripe() });
  const emailOf = (userId: string) =>
    app.db.maybeOneFirst(sql.type(z.object({ email: z.string() }))`select email from users where id = ${userId}`);

  for (const plan of ['pro', 'enterprise'] as const) {
    app.post(
      plan === 'pro' ? '/api/billing/checkout' : '/api/billing/checkout/enterprise',
      {
        ...admin,
        schema: {
          operationId: plan === 'pro' ? 'createCheckoutSession' : 'createEnterpriseCheckoutSession',
          tags: ['billing'],
          summary: `Start a Stripe checkout for the ${plan === 'pro' ? 'Pro' : 'Enterprise'} plan`,
          description:
            'Tenant Admin. Answers the checkout URL for the person; the plan changes when the payment event arrives. 409 already_on_plan when the workspace has this plan or a higher one, 409 subscription_exists when it pays for another Stripe plan (change it in the portal); 503 billing_not_configured.',
          security,
          headers: TenantHeaders,
          response: { 200: CheckoutResult, ...errors },
        },
      },
      async (request) =>
        startCheckout(deps(), request.tenant!.id, plan, await emailOf(request.user!.userId)).catch(refused),
    );
  }

  app.post(
    '/api/billing/portal',
    {
      ...admin,
      schema: {
        operationId: 'createBillingPortalSession',
        tags: ['billing'],
        summary: 'Open the Stripe customer portal (payment methods, invoices, cancel)',
        description: 'Tenant Admin. 409 no_billing_customer before the first checkout.',
        security,
        headers: TenantHeaders,
        response: { 200: PortalResult, ...errors },
      },
    },
    async (request) => openPortal(deps(), request.tenant!.id).catch(refused),
  );

  app.post(
    '/api/billing/agent-addon',
    {
      ...admin,
      schema: {
        operationId: 'buyAgentAddon',
        tags: ['billing'],
        summary: 'Buy one more agent slot on the Stripe subscription (prorated)',
        description:
          'Tenant Admin. 409 no_active_subscription without a paid Stripe subscription. The slot is usable as soon as this answers.',
        security,
        headers: AddonHeaders,
        response: { 200: AddonResult, ...errors },
      },
    },
    async (request) => addAgentSlot(deps(), request.tenant!.id, request.headers['idempotency-key']).catch(refused),
  );
};

export default stripeBillingRoutes;
