// Runs of a tenant's own scheduled jobs, as the tenant reports them. The
// duration is the reported one, else the time between start and finish.
import { z } from 'zod';
import { sql, type CommonQueryMethods } from '../db/pool.ts';
import { Count } from './periods.ts';

export const CRON_RUN_STATUSES = ['running', 'succeeded', 'failed', 'skipped'] as const;
export type CronRunStatus = (typeof CRON_RUN_STATUSES)[number];

export const CronRunRow = z.object({
  id: z.string(),
  name: z.string(),
  status: z.enum(CRON_RUN_STATUSES),
  started_at: z.string(),
  finished_at: z.string().nullable(),
  duration_ms: Count.nullable(),
  detail: z.record(z.string(), z.unknown()),
  created_at: z.string(),
});
export type CronRunRow = z.infer<typeof CronRunRow>;

export type CronRunInput = {
  tenantId: string;
  userId: string | null;
  name: string;
  status: CronRunStatus;
  startedAt: string;
  finishedAt?: string | undefined;
  durationMs?: number | undefined;
  detail?: Record<string, unknown> | undefined;
};

export async function recordCronRun(db: CommonQueryMethods, input: CronRunInput): Promise<CronRunRow> {
  const finished = input.finishedAt ?? null;
  return db.one(sql.type(CronRunRow)`
    insert into external_cron_runs (tenant_id, name, status, started_at, finished_at, duration_ms, detail, created_by)
    values (${input.tenantId}, ${input.name}, ${input.status}, ${input.startedAt}::timestamptz, ${finished}::timestamptz,
      coalesce(${input.durationMs ?? null}::bigint,
        (extract(epoch from ${finished}::timestamptz - ${input.startedAt}::timestamptz) * 1000)::bigint),
      ${sql.jsonb((input.detail ?? {}) as never)}, ${input.userId})
    returning id, name, status, started_at, finished_at, duration_ms, detail, created_at`);
}
