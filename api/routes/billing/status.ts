// GET /api/billing/status: the tenant's plan, its user messages this UTC
// month against the plan's limit, the plan's limits and platform credits.
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { billingStatus } from '../../../core/billing/status.ts';
import { ENTITLEMENT_SOURCES, SUBSCRIPTION_STATUSES } from '../../../core/billing/entitlements.ts';
import { PLANS } from '../../../core/plans.ts';
import { PlatformError, PlatformHttpError } from '../../errors.ts';
import { TenantHeaders } from '../../plugins/tenant.ts';

const BillingStatus = z
  .object({
    plan: z.enum(Object.keys(PLANS) as [keyof typeof PLANS, ...(keyof typeof PLANS)[]]),
    status: z
      .enum(SUBSCRIPTION_STATUSES)
      .describe('State of the subscription behind the plan; canceled when a paid plan ended'),
    source: z
      .enum(ENTITLEMENT_SOURCES)
      .nullable()
      .describe(
        "What grants the plan: stripe, in_app or operator; null for the default free plan. A plan paid in the billing sandbox is stripe too (the sandbox speaks Stripe's API): billingMode says which",
      ),
    billingMode: z
      .enum(['stripe', 'sandbox', 'disabled'])
      .describe(
        "Where this deployment's Stripe is: stripe (api.stripe.com or STRIPE_API_BASE), sandbox (the built-in development sandbox, nothing is charged), or disabled",
      ),
    periodEnd: z.iso.datetime().nullable().describe('End of the paid period (renews unless cancelled)'),
    agentSlots: z.object({
      included: z.int().describe('Agents the plan includes'),
      addons: z.int().describe('Extra slots bought with POST /api/billing/agent-addon'),
      used: z.int().describe('Company agents and managed agents that exist'),
      available: z.int(),
    }),
    period: z.object({ start: z.iso.date(), end: z.iso.date() }).describe('The current UTC month, both days included'),
    messageCount: z.int().describe("User messages sent in the tenant's chats this month"),
    remainingMessages: z.int(),
    limits: z.object({
      monthlyMessages: z.int(),
      models: z.array(z.string()).describe('Models the plan allows (provider/* patterns)'),
      companyWork: z.boolean(),
    }),
    credits: z.object({ balanceMicros: z.int().describe('Platform credits in micro-dollars') }),
  })
  .meta({ id: 'BillingStatus' });

const billingStatusRoutes: FastifyPluginAsyncZod = async (app) => {
  app.get(
    '/api/billing/status',
    {
      onRequest: app.requireUser,
      preValidation: app.requireTenant('viewer'),
      schema: {
        operationId: 'getBillingStatus',
        tags: ['billing'],
        summary: 'Plan, subscription state, agent slots, message count and usage limits',
        security: [{ PlatformJWT: [] }],
        headers: TenantHeaders,
        response: {
          200: BillingStatus,
          400: PlatformError,
          401: PlatformError,
          403: PlatformError,
          404: PlatformError,
        },
      },
    },
    async (request) => {
      const status = await billingStatus(app.db, request.tenant!.id);
      if (!status) throw new PlatformHttpError(404, 'not_found', 'No such tenant.');
      return {
        ...status,
        billingMode: app.config.billing.mode,
        limits: { ...status.limits, models: [...status.limits.models] },
      };
    },
  );
};

export default billingStatusRoutes;
