// Per-plan fairness and quotas (core/jobs/plan-limits.ts). Unset, a plan keeps
// what the database holds (the migration's values or an earlier start's).
import { z } from 'zod';
import { group, setting } from '../declare.ts';
import { planValues } from '../parsers.ts';

const keeps = (values: string) => `\`${values}\` (the migration's)`;

export const plans = group(
  'Plan limits',
  'Each process writes what is set at start, so set the same on all; see [Pools, fair shares, waits](jobs.md#pools-fair-shares-waits).',
  {
    PLAN_FAIR_WEIGHTS: setting(planValues(z.number().positive().max(1000)), {
      shown: keeps('free=1,pro=4,enterprise=16'),
      doc: "Per plan, an account's weight in the fair order of jobs",
    }),
    PLAN_MAX_WORKSPACES: setting(planValues(z.number().int().min(1).max(100_000)), {
      shown: keeps('free=3,pro=20,enterprise=50'),
      doc: 'Per plan, the workspaces an account may create',
    }),
    PLAN_MAX_OPEN_JOBS: setting(planValues(z.number().int().min(1).max(100_000_000)), {
      shown: keeps('free=200,pro=5000,enterprise=50000'),
      doc: 'Per plan, the unfinished jobs an account may have',
    }),
  },
);
