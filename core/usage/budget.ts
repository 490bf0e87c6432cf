// A tenant's monthly spending budget: its own limit (tenant_budgets) or its
// plan's default; used is this UTC month's cost from the usage reports, so
// it matches GET /api/usage/summary?period=month.
import { z } from 'zod';
import { sql, type CommonQueryMethods, type DatabasePool } from '../db/pool.ts';
import { planOf, type PlanName } from '../plans.ts';
import { Count, periodBounds } from './periods.ts';
import { totalsOver } from './reports.ts';

/** Default monthly budgets in micro-dollars (belongs in core/plans.ts once it has a field for it). */
export const PLAN_MONTHLY_BUDGET_MICROS: Record<PlanName, number> = {
  free: 5_000_000,
  pro: 200_000_000,
  enterprise: 5_000_000_000,
};

export const MAX_BUDGET_MICROS = 1_000_000_000_000_000;

export type Budget = {
  plan: PlanName;
  source: 'tenant' | 'plan';
  limitMicros: number;
  usedMicros: number;
  remainingMicros: number;
  periodStart: string;
  periodEnd: string;
};

const Limit = z.object({ plan: z.string(), own_limit: Count.nullable() });

/** null when the tenant does not exist. */
export async function getBudget(db: CommonQueryMethods, tenantId: string): Promise<Budget | null> {
  const row = await db.maybeOne(sql.type(Limit)`
    select t.plan, b.monthly_limit_micros as own_limit
    from tenants t left join tenant_budgets b on b.tenant_id = t.id
    where t.id = ${tenantId}`);
  if (!row) return null;
  const plan = planOf(row.plan).name;
  const month = await periodBounds(db, 'month');
  const used = (await totalsOver(db, tenantId, month)).cost_micros;
  const limit = row.own_limit ?? PLAN_MONTHLY_BUDGET_MICROS[plan];
  return {
    plan,
    source: row.own_limit === null ? 'plan' : 'tenant',
    limitMicros: limit,
    usedMicros: used,
    remainingMicros: Math.max(0, limit - used),
    periodStart: month.from,
    periodEnd: month.to,
  };
}

/** Sets the tenant's own limit, or with null goes back to the plan's default. */
export async function setBudget(
  db: CommonQueryMethods,
  tenantId: string,
  userId: string,
  monthlyLimitMicros: number | null,
) {
  if (monthlyLimitMicros === null) {
    await db.query(sql.unsafe`delete from tenant_budgets where tenant_id = ${tenantId}`);
  } else {
    await db.query(sql.unsafe`
      insert into tenant_budgets (tenant_id, monthly_limit_micros, updated_by)
      values (${tenantId}, ${monthlyLimitMicros}, ${userId})
      on conflict (tenant_id) do update
        set monthly_limit_micros = excluded.monthly_limit_micros, updated_by = excluded.updated_by, updated_at = now()`);
  }
  return getBudget(db, tenantId);
}

const Snapshot = z.object({ id: z.string(), taken_at: z.string() });

/** Records the budget as it is now; null when the tenant does not exist. */
export async function takeBudgetSnapshot(db: DatabasePool, tenantId: string, userId: string | null) {
  return db.transaction(async (tx) => {
    const budget = await getBudget(tx, tenantId);
    if (!budget) return null;
    const row = await tx.one(sql.type(Snapshot)`
      insert into budget_snapshots (tenant_id, period_start, limit_micros, used_micros, remaining_micros, limit_source, created_by)
      values (${tenantId}, ${budget.periodStart}::date, ${budget.limitMicros}, ${budget.usedMicros}, ${budget.remainingMicros},
        ${budget.source}, ${userId})
      returning id, taken_at`);
    return { id: row.id, takenAt: row.taken_at, ...budget };
  });
}
