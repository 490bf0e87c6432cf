// Billing status of a tenant (plan and where it comes from, agent slots, messages this month, the plan's limits,
// platform credits). The chat send decides its quota from the same counter
// (core/chat/send.ts).
// A message is a chat message with role 'user'; months are UTC months.
import { z } from 'zod';
import { sql, type CommonQueryMethods } from '../db/pool.ts';
import { planOf, type PlanName } from '../plans.ts';
import { Count } from '../usage/periods.ts';
import type { EntitlementSource, SubscriptionStatus } from './entitlements.ts';

const Row = z.object({
  plan: z.string(),
  plan_status: z.string(),
  plan_source: z.string().nullable(),
  plan_period_end: z.string().nullable(),
  agent_addons: z.number(),
  agents_used: z.number(),
  used: z.number(),
  balance_micros: Count.nullable(),
  period_start: z.string(),
  period_end: z.string(),
});

// Month bounds once, so the count and the reported period agree.
async function monthOf(db: CommonQueryMethods, tenantId: string) {
  return db.maybeOne(sql.type(Row)`
    with m as (select date_trunc('month', now() at time zone 'UTC') as start)
    select t.plan, t.plan_status, t.plan_source, t.plan_period_end, t.agent_addons,
      (select count(*) from company_agents a where a.tenant_id = t.id)
        + (select count(*) from managed_agents g where g.tenant_id = t.id and g.status <> 'deleted') as agents_used,
      -- The per-month count the send quota reads too (kept by a trigger on chat_messages).
      coalesce((select messages from tenant_message_counts c where c.tenant_id = t.id and c.month = m.start::date), 0) as used,
      (select balance_micros from tenant_credits k where k.tenant_id = t.id) as balance_micros,
      m.start::date::text as period_start,
      (m.start + interval '1 month' - interval '1 day')::date::text as period_end
    from tenants t, m
    where t.id = ${tenantId}`);
}

export type BillingStatus = {
  plan: PlanName;
  status: SubscriptionStatus;
  source: EntitlementSource | null;
  periodEnd: string | null;
  agentSlots: { included: number; addons: number; used: number; available: number };
  period: { start: string; end: string };
  messageCount: number;
  limits: { monthlyMessages: number; models: readonly string[]; companyWork: boolean };
  remainingMessages: number;
  credits: { balanceMicros: number };
};

/** null when the tenant does not exist. */
export async function billingStatus(db: CommonQueryMethods, tenantId: string): Promise<BillingStatus | null> {
  const row = await monthOf(db, tenantId);
  if (!row) return null;
  const plan = planOf(row.plan);
  return {
    plan: plan.name,
    status: row.plan_status as SubscriptionStatus,
    source: row.plan_source as EntitlementSource | null,
    periodEnd: row.plan_period_end,
    agentSlots: {
      included: plan.agentSlots,
      addons: row.agent_addons,
      used: row.agents_used,
      available: Math.max(0, plan.agentSlots + row.agent_addons - row.agents_used),
    },
    period: { start: row.period_start, end: row.period_end },
    messageCount: row.used,
    limits: { monthlyMessages: plan.monthlyMessages, models: plan.models, companyWork: plan.companyWork },
    remainingMessages: Math.max(0, plan.monthlyMessages - row.used),
    credits: { balanceMicros: row.balance_micros ?? 0 },
  };
}
