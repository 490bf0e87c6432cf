// In-app purchases (iOS, through a RevenueCat-style provider): the tenant's
// 'in_app' entitlement, kept equal to what the provider says.
//
// The iOS app identifies the tenant to the provider with app user id = the
// tenant id, so the provider's subscriber is the tenant (see
// purchase-provider.ts for the API and the entitlement → plan mapping).
//
// Nothing here trusts a webhook's copy of the purchase: every event, and the
// app's own "sync" call after a purchase or restore, re-reads the subscriber
// from the provider and writes what it says now. Deliveries that arrive late,
// twice or out of order therefore all converge on the provider's state. Each
// write carries the time its state was read (the provider's request_date_ms,
// never earlier than the event that caused it); setEntitlement refuses a write
// older than the stored one ('stale'), so a slow reader can never put back an
// older state over a newer one.
import type { Logger } from 'pino';
import { z } from 'zod';
import type { Config } from '../config.ts';
import { sql, type CommonQueryMethods, type DatabasePool } from '../db/pool.ts';
import { PermanentJobError, RetryableJobError } from '../jobs/errors.ts';
import { PLAN_NAMES, type PlanName } from '../plans.ts';
import { setEntitlement, SUBSCRIPTION_STATUSES, type SubscriptionStatus } from './entitlements.ts';
import type { EventRow } from './events.ts';
import {
  entitlementFromSubscriber,
  fetchSubscriber,
  PurchaseProviderError,
  type PurchaseState,
  type SubscriberResponse,
} from './purchase-provider.ts';

export {
  entitlementFromSubscriber,
  fetchSubscriber,
  PurchaseProviderError,
  type PurchaseState,
} from './purchase-provider.ts';

export type PurchaseDeps = { db: DatabasePool; config: Config; logger?: Pick<Logger, 'info'> };

/** Provider event types that make the job re-read the subscriber; others are stored and ignored. */
export const HANDLED_PURCHASE_EVENTS = new Set([
  'INITIAL_PURCHASE',
  'RENEWAL',
  'CANCELLATION',
  'UNCANCELLATION',
  'EXPIRATION',
  'PRODUCT_CHANGE',
  'BILLING_ISSUE',
  'NON_RENEWING_PURCHASE',
  'SUBSCRIPTION_EXTENDED',
  // Purchases moved from one app user to another (a restore in another
  // workspace): both sides are re-read. It names no app_user_id.
  'TRANSFER',
]);

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The provider's webhook event (the fields we read; everything else is kept as sent). */
export const PurchaseWebhookEvent = z.looseObject({
  id: z.string().min(1).max(200),
  type: z.string().min(1).max(100),
  app_user_id: z.string().max(500).nullable().optional(),
  // Up to the end of year 9999: later instants are JavaScript dates whose
  // ISO form (+YYYYYY-...) PostgreSQL does not read.
  event_timestamp_ms: z.number().int().min(0).max(253_402_300_799_999),
  transferred_from: z.array(z.string()).nullable().optional(),
  transferred_to: z.array(z.string()).nullable().optional(),
});
export type PurchaseWebhookEvent = z.infer<typeof PurchaseWebhookEvent>;

type EventUsers = Pick<PurchaseWebhookEvent, 'type' | 'app_user_id' | 'transferred_from' | 'transferred_to'>;

/** App user ids an event is about: its app_user_id; a TRANSFER's both sides, the receiving side first. */
function appUsersOf(event: EventUsers): string[] {
  const ids =
    event.type === 'TRANSFER'
      ? [event.app_user_id, ...(event.transferred_to ?? []), ...(event.transferred_from ?? [])]
      : [event.app_user_id];
  return [
    ...new Set(ids.filter((v): v is string => typeof v === 'string' && UUID.test(v)).map((v) => v.toLowerCase())),
  ];
}

/** Existing tenants among the event's app user ids (app user id = tenant id), receiving side first. */
export async function tenantsOfPurchaseEvent(db: CommonQueryMethods, event: EventUsers): Promise<string[]> {
  const candidates = appUsersOf(event);
  if (candidates.length === 0) return [];
  const found = new Set(
    await db.anyFirst(
      sql.type(z.object({ id: z.string() }))`select id from tenants where id = any(${sql.array(candidates, 'uuid')})`,
    ),
  );
  return candidates.filter((id) => found.has(id));
}

const Stored = z.object({
  plan: z.enum(PLAN_NAMES).nullable(),
  status: z.enum(SUBSCRIPTION_STATUSES).nullable(),
  expires_at: z.string().nullable(),
  current_period_end: z.string().nullable(),
  external_ref: z.string().nullable(),
  tenant_plan: z.enum(PLAN_NAMES),
  tenant_status: z.enum(SUBSCRIPTION_STATUSES),
  tenant_source: z.string().nullable(),
});

export type PurchaseSyncResult = {
  tenantId: string;
  /** What the provider says now. */
  provider: PurchaseState;
  /** applied: written; stale: a newer state was already stored; none: nothing of ours ever bought, nothing stored. */
  write: 'applied' | 'stale' | 'none';
  /** The stored in-app entitlement after the write; null when there is none. */
  inApp: {
    plan: PlanName;
    status: SubscriptionStatus;
    expiresAt: string | null;
    currentPeriodEnd: string | null;
    externalRef: string | null;
  } | null;
  /** The tenant's effective plan (the best of all sources). */
  tenant: { plan: PlanName; status: SubscriptionStatus; source: string | null };
};

type Read = { tenantId: string; response: SubscriberResponse | null; state: PurchaseState; asOf: Date };

/** Reads one tenant's subscriber (outside any transaction). */
async function readTenant(config: Config, tenantId: string, eventAt: Date | undefined): Promise<Read> {
  const response = await fetchSubscriber(config, tenantId);
  const requestedAt = response?.request_date_ms ?? Date.now();
  const asOf = new Date(Math.max(requestedAt, eventAt?.getTime() ?? 0));
  const state = response
    ? entitlementFromSubscriber(config, response.subscriber, new Date(requestedAt))
    : entitlementFromSubscriber(config, { entitlements: {}, subscriptions: {} }, new Date(requestedAt));
  return { tenantId, response, state, asOf };
}

/**
 * Writes what was read, inside the caller's transaction. null when the tenant
 * no longer exists. A subscriber with none of our entitlements, and no stored
 * in-app row, writes nothing: the tenant's plan and status stay as they are.
 */
async function writeTenant(tx: CommonQueryMethods, read: Read, reason: string): Promise<PurchaseSyncResult | null> {
  const { tenantId, state, asOf } = read;
  const exists = await tx.maybeOneFirst(
    sql.type(z.object({ id: z.string() }))`select id from tenants where id = ${tenantId} for update`,
  );
  if (!exists) return null;
  let write: PurchaseSyncResult['write'] = 'none';
  const hadRow = await tx.exists(
    sql.unsafe`select 1 from billing_entitlements where tenant_id = ${tenantId} and source = 'in_app'`,
  );
  if (state.entitlementId || hadRow) {
    write = await setEntitlement(
      tx,
      {
        tenantId,
        source: 'in_app',
        plan: state.plan,
        status: state.status,
        expiresAt: state.expiresAt,
        currentPeriodEnd: state.currentPeriodEnd,
        externalRef: state.externalRef,
        eventAt: asOf,
      },
      reason,
    );
  }
  const row = await tx.one(sql.type(Stored)`
    select e.plan, e.status, e.expires_at, e.current_period_end, e.external_ref,
           t.plan as tenant_plan, t.plan_status as tenant_status, t.plan_source as tenant_source
      from tenants t left join billing_entitlements e on e.tenant_id = t.id and e.source = 'in_app'
     where t.id = ${tenantId}`);
  return {
    tenantId,
    provider: state,
    write,
    inApp:
      row.plan && row.status
        ? {
            plan: row.plan,
            status: row.status,
            expiresAt: row.expires_at,
            currentPeriodEnd: row.current_period_end,
            externalRef: row.external_ref,
          }
        : null,
    tenant: { plan: row.tenant_plan, status: row.tenant_status, source: row.tenant_source },
  };
}

export class UnknownTenantError extends Error {
  override name = 'UnknownTenantError';
}

/**
 * Re-reads the tenant's purchases from the provider and stores them as the
 * tenant's in-app entitlement (the plan is recomputed in the same
 * transaction). `eventAt`: the event that asked for it, if any. Throws
 * PurchaseProviderError when the provider cannot be read.
 */
export async function syncPurchases(
  deps: PurchaseDeps,
  tenantId: string,
  reason: string,
  eventAt?: Date,
): Promise<PurchaseSyncResult> {
  const read = await readTenant(deps.config, tenantId, eventAt);
  const result = await deps.db.transaction((tx) => writeTenant(tx, read, reason));
  if (!result) throw new UnknownTenantError(`No tenant ${tenantId}.`);
  logSync(deps.logger, result, reason);
  return result;
}

function logSync(logger: Pick<Logger, 'info'> | undefined, r: PurchaseSyncResult, reason: string) {
  logger?.info(
    {
      tenantId: r.tenantId,
      reason,
      write: r.write,
      inAppPlan: r.inApp?.plan ?? null,
      inAppStatus: r.inApp?.status ?? null,
      tenantPlan: r.tenant.plan,
    },
    'in-app purchases synced',
  );
}

/** Provider errors as job errors: a wrong key or missing setting is permanent, the rest is retried. */
function jobError(error: unknown): unknown {
  if (!(error instanceof PurchaseProviderError)) return error;
  if (error.kind === 'unavailable') return new RetryableJobError(error.code, error.message);
  return new PermanentJobError(error.code, error.message);
}

export type PurchaseOutcome = { status: 'applied' | 'ignored'; outcome: string; plan?: PlanName };

/**
 * Applies one stored provider event (the billing.webhook job): re-reads the
 * subscriber(s) it names and writes them, calling `finish` in the same
 * transaction as the write (or in its own small transaction when the event
 * is ignored). Throws RetryableJobError when the provider is unavailable,
 * PermanentJobError when it refuses our key or none is configured.
 */
export async function applyPurchaseEvent(
  deps: { db: DatabasePool; config: Config; logger: Logger },
  event: EventRow,
  finish: (tx: CommonQueryMethods, outcome: { status: 'applied' | 'ignored'; outcome: string }) => Promise<void>,
): Promise<PurchaseOutcome> {
  const ignore = async (outcome: string): Promise<PurchaseOutcome> => {
    const result: PurchaseOutcome = { status: 'ignored', outcome };
    await deps.db.transaction((tx) => finish(tx, result));
    return result;
  };
  if (!HANDLED_PURCHASE_EVENTS.has(event.type)) return ignore('unhandled_type');
  const payload = PurchaseWebhookEvent.safeParse((event.payload as { event?: unknown } | null)?.event);
  if (!payload.success) return ignore('invalid_payload');

  // The tenant found at receipt, and for a transfer every existing tenant on either side.
  const tenants = event.tenant_id ? [event.tenant_id] : [];
  if (event.type === 'TRANSFER') {
    for (const id of await tenantsOfPurchaseEvent(deps.db, payload.data)) if (!tenants.includes(id)) tenants.push(id);
  }
  if (tenants.length === 0) return ignore('unknown_tenant');

  const eventAt = new Date(payload.data.event_timestamp_ms);
  const reads: Read[] = [];
  try {
    for (const tenantId of tenants) reads.push(await readTenant(deps.config, tenantId, eventAt));
  } catch (error) {
    throw jobError(error);
  }

  const reason = `in-app ${event.type} ${event.event_id}`;
  return deps.db.transaction(async (tx): Promise<PurchaseOutcome> => {
    const results: PurchaseSyncResult[] = [];
    for (const read of reads) {
      const result = await writeTenant(tx, read, reason);
      if (result) results.push(result);
    }
    const outcome = outcomeOf(results, tenants.length > 1);
    await finish(tx, outcome);
    for (const r of results) logSync(deps.logger, r, reason);
    return outcome;
  });
}

function outcomeOf(results: PurchaseSyncResult[], named: boolean): PurchaseOutcome {
  if (results.length === 0) return { status: 'ignored', outcome: 'unknown_tenant' };
  const describe = (r: PurchaseSyncResult) =>
    r.write === 'applied'
      ? `${r.provider.plan} ${r.provider.status}`
      : r.write === 'stale'
        ? 'older_than_state'
        : 'no_entitlement';
  const applied = results.some((r) => r.write === 'applied');
  if (!named) {
    const [r] = results as [PurchaseSyncResult];
    return {
      status: applied ? 'applied' : 'ignored',
      outcome: describe(r),
      ...(applied ? { plan: r.provider.plan } : {}),
    };
  }
  return {
    status: applied ? 'applied' : 'ignored',
    outcome: results.map((r) => `${r.tenantId}: ${describe(r)}`).join('; '),
  };
}
