// Per-plan settings of fairness and quotas (table plan_limits, migration
// 0037): the weight of an account's jobs in the fair order, and how many
// workspaces and unfinished jobs an account may have. The migration sets the
// defaults; PLAN_FAIR_WEIGHTS, PLAN_MAX_WORKSPACES and PLAN_MAX_OPEN_JOBS
// ("free=1,pro=4,enterprise=16", declared in core/config/groups/plans.ts)
// change them, written by every api and worker process at start. Set the
// same values on every process.
import { z } from 'zod';
import { sql, type CommonQueryMethods } from '../db/pool.ts';
import { PLAN_NAMES, type PlanName } from '../plans.ts';

export type PlanValues = Partial<Record<PlanName, number>>;
export type PlanLimitSettings = { fairWeight: PlanValues; maxWorkspaces: PlanValues; maxOpenJobs: PlanValues };

/** Writes the configured values (nothing when none is configured). */
export async function applyPlanLimits(db: CommonQueryMethods, settings: PlanLimitSettings): Promise<void> {
  const rows = PLAN_NAMES.map((plan) => ({
    plan,
    fair_weight: settings.fairWeight[plan] ?? null,
    max_workspaces: settings.maxWorkspaces[plan] ?? null,
    max_open_jobs: settings.maxOpenJobs[plan] ?? null,
  })).filter((r) => r.fair_weight !== null || r.max_workspaces !== null || r.max_open_jobs !== null);
  if (rows.length === 0) return;
  await db.query(sql.unsafe`
    update plan_limits l set fair_weight = coalesce(r.fair_weight, l.fair_weight),
      max_workspaces = coalesce(r.max_workspaces, l.max_workspaces), max_open_jobs = coalesce(r.max_open_jobs, l.max_open_jobs)
    from jsonb_to_recordset(${sql.jsonb(rows)}) as r(plan text, fair_weight real, max_workspaces integer, max_open_jobs integer)
    where l.plan = r.plan`);
}

export const PlanLimitsRow = z.object({
  plan: z.string(),
  fair_weight: z.number(),
  max_workspaces: z.number(),
  max_open_jobs: z.number(),
});

export async function readPlanLimits(db: CommonQueryMethods) {
  return db.any(
    sql.type(
      PlanLimitsRow,
    )`select plan, fair_weight, max_workspaces, max_open_jobs from plan_limits order by max_open_jobs`,
  );
}
