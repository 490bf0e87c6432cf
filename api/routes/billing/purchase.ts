// In-app purchases (iOS, through a RevenueCat-style provider).
//
// The iOS app logs in to the provider with app user id = the tenant id
// (exactly as this API returns it: lowercase; the provider's ids are
// case-sensitive), so the provider's subscriber is the tenant
// (core/billing/purchase-provider.ts).
//
// POST /api/billing/purchase-sync (Tenant + Admin): the app calls it after a
//   purchase or a restore; the subscriber is re-read from the provider and
//   stored as the tenant's in-app entitlement at once.
// POST /api/billing/purchase-webhook: the provider's events, authorized with
//   `Authorization: Bearer <PURCHASE_WEBHOOK_SECRET>` (compared in constant
//   time, checked before the body is read). A good event is stored once by its
//   id and answered 200 at once; the billing.webhook job re-reads the
//   subscriber, so late, repeated or out-of-order deliveries all converge.
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { FastifyRequest } from 'fastify';
import { z } from 'zod';
import { SUBSCRIPTION_STATUSES } from '../../../core/billing/entitlements.ts';
import { storeInboundEvent } from '../../../core/billing/events.ts';
import {
  HANDLED_PURCHASE_EVENTS,
  PurchaseProviderError,
  PurchaseWebhookEvent,
  syncPurchases,
  tenantsOfPurchaseEvent,
  UnknownTenantError,
} from '../../../core/billing/purchase.ts';
import { constantTimeEqual } from '../../../core/crypto/tokens.ts';
import { PLAN_NAMES } from '../../../core/plans.ts';
import { PlatformError, PlatformHttpError } from '../../errors.ts';
import { TenantHeaders } from '../../plugins/tenant.ts';
import { received, WebhookReceived } from './received.ts';

const MAX_EVENT_BYTES = 256 * 1024;

const PurchaseSyncResult = z
  .object({
    plan: z.enum(PLAN_NAMES).describe('The plan the in-app purchases grant; free when none is active'),
    status: z
      .enum(SUBSCRIPTION_STATUSES)
      .describe('active, trialing, past_due (billing issue, in grace) or canceled (nothing active)'),
    source: z.literal('in_app'),
    expiresAt: z.iso
      .datetime()
      .nullable()
      .describe('When the in-app grant ends by itself; null for a lifetime purchase or when nothing is granted'),
    entitlement: z.object({
      id: z
        .string()
        .nullable()
        .describe(
          "The provider's entitlement identifier (PURCHASE_ENTITLEMENT_PRO / _ENTERPRISE); null when the subscriber has none of ours",
        ),
      productId: z.string().nullable().describe('The store product behind it'),
      currentPeriodEnd: z.iso.datetime().nullable().describe('End of the paid period'),
      willRenew: z
        .boolean()
        .nullable()
        .describe('false once auto-renew was turned off; null for a lifetime purchase or nothing'),
      stored: z
        .enum(['applied', 'stale', 'none'])
        .describe(
          'applied: stored now; stale: a newer state was already stored (shown here); none: nothing of ours was ever bought, nothing stored',
        ),
    }),
    tenantPlan: z
      .enum(PLAN_NAMES)
      .describe("The workspace's effective plan: the best of its in-app, Stripe and operator grants"),
  })
  .meta({ id: 'PurchaseSyncResult' });

const PurchaseWebhookBody = z
  .looseObject({
    api_version: z.string().optional(),
    event: PurchaseWebhookEvent.describe(
      'The event; id, type and event_timestamp_ms are required, app_user_id names the tenant, other fields are kept as sent',
    ),
  })
  .describe("The in-app purchase provider's webhook body");

/** Provider failures as platform errors; anything else is unexpected. */
function providerRefusal(error: unknown): never {
  if (error instanceof UnknownTenantError) throw new PlatformHttpError(404, 'not_found', 'No such tenant.');
  if (error instanceof PurchaseProviderError) {
    if (error.kind === 'not_configured') throw new PlatformHttpError(503, 'billing_not_configured', error.message);
    throw new PlatformHttpError(502, error.code, error.message);
  }
  throw error;
}

const purchaseRoutes: FastifyPluginAsyncZod = async (app) => {
  app.post(
    '/api/billing/purchase-sync',
    {
      onRequest: app.requireUser,
      preValidation: app.requireTenant('admin'),
      schema: {
        operationId: 'syncInAppPurchases',
        tags: ['billing'],
        summary: "Re-read the workspace's in-app purchases from the provider and apply them now",
        description:
          'Tenant Admin. The iOS app calls this after a purchase or a restore (the app user id at the provider is the tenant id). ' +
          '503 billing_not_configured without PURCHASE_API_KEY; 502 purchase_provider_unavailable when the provider cannot be read.',
        security: [{ PlatformJWT: [] }],
        headers: TenantHeaders,
        body: z.object({}).strict().nullish().describe('Empty (or no body)'),
        response: {
          200: PurchaseSyncResult,
          400: PlatformError,
          401: PlatformError,
          403: PlatformError,
          404: PlatformError,
          502: PlatformError,
          503: PlatformError,
        },
      },
    },
    async (request) => {
      const tenantId = request.tenant!.id;
      const result = await syncPurchases(
        { db: app.db, config: app.config, logger: request.log },
        tenantId,
        `in-app sync by user ${request.user!.userId}`,
      ).catch((error: unknown) => {
        if (error instanceof PurchaseProviderError && error.kind !== 'not_configured') {
          request.log.warn(
            { code: error.code, httpStatus: error.httpStatus },
            'in-app purchase provider could not be read',
          );
        }
        return providerRefusal(error);
      });
      const { provider, inApp } = result;
      return {
        plan: inApp?.plan ?? provider.plan,
        status: inApp?.status ?? provider.status,
        source: 'in_app' as const,
        expiresAt: inApp ? inApp.expiresAt : (provider.expiresAt?.toISOString() ?? null),
        entitlement: {
          id: provider.entitlementId,
          productId: inApp ? inApp.externalRef : provider.externalRef,
          currentPeriodEnd: inApp ? inApp.currentPeriodEnd : (provider.currentPeriodEnd?.toISOString() ?? null),
          willRenew: provider.willRenew,
          stored: result.write,
        },
        tenantPlan: result.tenant.plan,
      };
    },
  );

  // Runs before the body is read: an unauthorized sender learns nothing and stores nothing.
  const authorizeWebhook = async (request: FastifyRequest) => {
    const secret = app.config.billing.purchase.webhookSecret;
    if (!secret) {
      throw new PlatformHttpError(
        503,
        'billing_not_configured',
        'In-app purchase webhooks are not configured on this deployment: set PURCHASE_WEBHOOK_SECRET.',
      );
    }
    const header = request.headers.authorization;
    const presented =
      typeof header === 'string' && /^bearer\s+/i.test(header) ? header.replace(/^bearer\s+/i, '').trim() : '';
    // Both sides hashed first, so neither the length nor a prefix of the secret leaks through timing.
    if (!constantTimeEqual(presented, secret)) {
      request.log.warn(
        { present: typeof header === 'string' },
        'in-app purchase webhook refused: wrong or missing bearer secret',
      );
      throw new PlatformHttpError(401, 'unauthorized', 'Send Authorization: Bearer <PURCHASE_WEBHOOK_SECRET>.', {
        'www-authenticate': 'Bearer',
      });
    }
  };

  app.post(
    '/api/billing/purchase-webhook',
    {
      onRequest: authorizeWebhook,
      bodyLimit: MAX_EVENT_BYTES,
      schema: {
        operationId: 'receivePurchaseWebhook',
        tags: ['billing'],
        summary: 'In-app purchase provider webhook: purchase lifecycle events (stored once, applied by a job)',
        description:
          'Authorized with `Authorization: Bearer <PURCHASE_WEBHOOK_SECRET>` (set the same value as the authorization header at the provider). ' +
          `The event's app_user_id is the tenant id. Handled: ${[...HANDLED_PURCHASE_EVENTS].join(', ')}; every one makes the job re-read the subscriber. ` +
          'Other types (TEST, ...) and events about no known tenant are stored and ignored.',
        security: [{ PurchaseWebhookBearer: [] }],
        body: PurchaseWebhookBody,
        response: {
          200: WebhookReceived,
          400: PlatformError,
          401: PlatformError,
          413: PlatformError,
          415: PlatformError,
          503: PlatformError,
        },
      },
    },
    async (request) => {
      const body = request.body;
      const event = body.event;
      const [tenantId = null] = await tenantsOfPurchaseEvent(app.db, event);
      const stored = await storeInboundEvent(
        app.jobs,
        app.db,
        {
          provider: 'purchase',
          eventId: event.id,
          type: event.type,
          tenantId,
          createdAt: new Date(event.event_timestamp_ms),
          payload: body,
        },
        HANDLED_PURCHASE_EVENTS.has(event.type) ? undefined : 'unhandled_type',
      );
      request.log.info(
        { eventId: event.id, type: event.type, tenantId, duplicate: stored.duplicate, jobId: stored.jobId },
        'in-app purchase event received',
      );
      return received(stored);
    },
  );
};

export default purchaseRoutes;
