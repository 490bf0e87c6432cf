// Billing status of a tenant (plan, messages this month, the plan's limits,
// platform credits). The chat send decides its quota from the same counter
// (core/chat/send.ts).
// A message is a chat message with role 'user'; months are UTC months.
import { z } from 'zod';
import { sql, type CommonQueryMethods } from '../db/pool.ts';
import { planOf, type PlanName } from '../plans.ts';
import { Count } from '../usage/periods.ts';

const Row = z.object({
  plan: z.string(),
  used: z.number(),
  balance_micros: Count.nullable(),
  period_start: z.string(),
  period_end: z.string(),
});

// Month bounds once, so the count and the reported period agree.
async function monthOf(db: CommonQueryMethods, tenantId: string) {
  return db.maybeOne(sql.type(Row)`
    with m as (select date_trunc('month', now() at time zone 'UTC') as start)
    select t.plan,
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
    period: { start: row.period_start, end: row.period_end },
    messageCount: row.used,
    limits: { monthlyMessages: plan.monthlyMessages, models: plan.models, companyWork: plan.companyWork },
    remainingMessages: Math.max(0, plan.monthlyMessages - row.used),
    credits: { balanceMicros: row.balance_micros ?? 0 },
  };
}
