// A tenant's entitlements: one row per source (stripe, in_app, operator),
// folded into the tenant's effective plan by billing_refresh_plan() in the
// same transaction (sql/migrations/0016_billing.sql). Nothing else writes
// tenants.plan, so every reader sees one answer.
import { z } from 'zod';
import { sql, type CommonQueryMethods } from '../db/pool.ts';
import { PLAN_NAMES, planOf, type PlanName } from '../plans.ts';

export const ENTITLEMENT_SOURCES = ['stripe', 'in_app', 'operator'] as const;
export type EntitlementSource = (typeof ENTITLEMENT_SOURCES)[number];
export const SUBSCRIPTION_STATUSES = ['active', 'trialing', 'past_due', 'canceled', 'incomplete'] as const;
export type SubscriptionStatus = (typeof SUBSCRIPTION_STATUSES)[number];
/** Statuses that grant the plan (past_due: the processor is retrying a payment), as billing_refresh_plan() counts them. */
export const ENTITLED_STATUSES: readonly SubscriptionStatus[] = ['active', 'trialing', 'past_due'];
export const isEntitled = (status: string): boolean => (ENTITLED_STATUSES as readonly string[]).includes(status);

export type Entitlement = {
  tenantId: string;
  source: EntitlementSource;
  plan: PlanName;
  status: SubscriptionStatus;
  currentPeriodEnd?: Date | null;
  expiresAt?: Date | null;
  agentAddons?: number;
  externalRef?: string | null;
  /** The inbound event this state comes from; an older event than the stored one is not applied. */
  eventAt?: Date | null;
};

const PlanRow = z.object({ plan: z.enum(PLAN_NAMES).nullable() });

/**
 * Writes one source's state and recomputes the tenant's plan. Returns
 * 'stale' (nothing written) when the row already reflects a newer event.
 */
export async function setEntitlement(
  tx: CommonQueryMethods,
  e: Entitlement,
  reason: string,
): Promise<'applied' | 'stale'> {
  const eventAt = e.eventAt ? e.eventAt.toISOString() : null;
  const written = await tx.maybeOne(sql.type(z.object({ source: z.string() }))`
    insert into billing_entitlements
      (tenant_id, source, plan, status, current_period_end, expires_at, agent_addons, external_ref, last_event_at, updated_at)
    values (${e.tenantId}, ${e.source}, ${e.plan}, ${e.status},
            ${e.currentPeriodEnd ? e.currentPeriodEnd.toISOString() : null}, ${e.expiresAt ? e.expiresAt.toISOString() : null},
            ${e.agentAddons ?? 0}, ${e.externalRef ?? null}, ${eventAt}, now())
    on conflict (tenant_id, source) do update
      set plan = excluded.plan, status = excluded.status, current_period_end = excluded.current_period_end,
          expires_at = excluded.expires_at, agent_addons = excluded.agent_addons, external_ref = excluded.external_ref,
          last_event_at = greatest(billing_entitlements.last_event_at, excluded.last_event_at), updated_at = now()
      where excluded.last_event_at is null
         or billing_entitlements.last_event_at is null
         or excluded.last_event_at >= billing_entitlements.last_event_at
    returning source`);
  if (!written) return 'stale';
  await refreshPlan(tx, e.tenantId, reason);
  return 'applied';
}

/** Removes one source's grant (an operator's plan set back to free) and recomputes. */
export async function removeEntitlement(
  tx: CommonQueryMethods,
  tenantId: string,
  source: EntitlementSource,
  reason: string,
): Promise<void> {
  await tx.query(sql.unsafe`delete from billing_entitlements where tenant_id = ${tenantId} and source = ${source}`);
  await refreshPlan(tx, tenantId, reason);
}

/** The newest event applied to a source, to skip older deliveries before any outside call. */
export async function lastEventAt(
  db: CommonQueryMethods,
  tenantId: string,
  source: EntitlementSource,
): Promise<Date | null> {
  const at = await db.maybeOneFirst(sql.type(z.object({ last_event_at: z.string().nullable() }))`
    select last_event_at from billing_entitlements where tenant_id = ${tenantId} and source = ${source}`);
  return at ? new Date(at) : null;
}

/** Recomputes the effective plan; null when the tenant does not exist. */
export async function refreshPlan(tx: CommonQueryMethods, tenantId: string, reason: string): Promise<PlanName | null> {
  const row = await tx.one(sql.type(PlanRow)`select billing_refresh_plan(${tenantId}, ${reason}) as plan`);
  return row.plan;
}

/** Tenants whose grant has run out since the last refresh (the minute cron refreshes them). */
export async function refreshExpiredPlans(db: CommonQueryMethods): Promise<number> {
  const rows = await db.anyFirst(sql.type(z.object({ tenant_id: z.string() }))`
    select distinct e.tenant_id from billing_entitlements e join tenants t on t.id = e.tenant_id
     where e.expires_at <= now() and e.status = any(${sql.array([...ENTITLED_STATUSES], 'text')}) and t.plan_source = e.source`);
  for (const tenantId of rows) await refreshPlan(db, tenantId, 'entitlement expired');
  return rows.length;
}

/** Agents the tenant may have: the plan's slots plus add-ons, and how many exist. */
export async function agentSlots(
  db: CommonQueryMethods,
  tenantId: string,
): Promise<{ plan: PlanName; included: number; addons: number; used: number } | null> {
  const row = await db.maybeOne(sql.type(z.object({ plan: z.string(), agent_addons: z.number(), used: z.number() }))`
    select t.plan, t.agent_addons,
           (select count(*) from company_agents a where a.tenant_id = t.id)
         + (select count(*) from managed_agents m where m.tenant_id = t.id and m.status <> 'deleted') as used
      from tenants t where t.id = ${tenantId}`);
  if (!row) return null;
  const plan = planOf(row.plan);
  return { plan: plan.name, included: plan.agentSlots, addons: row.agent_addons, used: row.used };
}

export class AgentSlotsExhaustedError extends Error {
  override name = 'AgentSlotsExhaustedError';
  constructor(readonly slots: { plan: PlanName; included: number; addons: number; used: number }) {
    super(
      `All ${slots.included + slots.addons} agent slots are in use (${slots.included} in the ${slots.plan} plan, ${slots.addons} add-on). ` +
        'Buy another slot with POST /api/billing/agent-addon, upgrade the plan, or delete an agent.',
    );
  }
}

/**
 * Call inside the transaction that creates an agent: locks the tenant row so
 * two concurrent creations cannot both take the last slot.
 */
export async function claimAgentSlot(tx: CommonQueryMethods, tenantId: string): Promise<void> {
  await tx.query(sql.unsafe`select 1 from tenants where id = ${tenantId} for update`);
  const slots = await agentSlots(tx, tenantId);
  if (slots && slots.used >= slots.included + slots.addons) throw new AgentSlotsExhaustedError(slots);
}
