// Scheduled (cron) tasks have no platform job: each run is recorded in
// scheduled_job_runs instead, with what it did or why it failed (a task may
// keep only the runs that did something), and every run's start in
// scheduled_job_last_runs (one row per item).
import type { Task } from 'graphile-worker';
import { z } from 'zod';
import { sql } from '../core/db/pool.ts';
import { isDatabaseUnavailable } from '../core/db/unavailable.ts';
import type { TaskDefinition, TaskDeps } from './define-task.ts';

const CronPayload = z
  .object({ _cron: z.object({ ts: z.string(), backfilled: z.boolean().optional() }).optional() })
  .loose();

export type ScheduledRun = { scheduledFor: string | null; fromCron: boolean };

export function defineScheduledTask(
  kind: string,
  run: (deps: TaskDeps, info: ScheduledRun) => Promise<Record<string, unknown>>,
  options: { record?: (detail: Record<string, unknown>, info: ScheduledRun) => boolean } = {},
): TaskDefinition {
  const build =
    (deps: TaskDeps): Task =>
    async (payload, helpers) => {
      const cron = CronPayload.safeParse(payload ?? {});
      const info: ScheduledRun = {
        scheduledFor: cron.success ? (cron.data._cron?.ts ?? null) : null,
        fromCron: Boolean(cron.success && cron.data._cron),
      };
      const identifier = helpers.job.key ?? kind;
      const startedAt = new Date();
      await deps.db.query(sql.unsafe`
      insert into scheduled_job_last_runs (identifier, task, scheduled_for, started_at)
      values (${identifier}, ${kind}, ${info.scheduledFor}, ${startedAt.toISOString()})
      on conflict (identifier) do update set task = excluded.task, scheduled_for = excluded.scheduled_for, started_at = excluded.started_at`);
      try {
        const detail = await run(deps, info);
        if (options.record?.(detail, info) ?? true) {
          await deps.db.query(sql.unsafe`
          insert into scheduled_job_runs (identifier, task, scheduled_for, started_at, finished_at, status, detail)
          values (${identifier}, ${kind}, ${info.scheduledFor}, ${startedAt.toISOString()}, now(), 'succeeded', ${sql.jsonb(detail as never)})`);
        }
        // At info only when it did something: an idle platform logs nothing on a schedule.
        deps.logger[didSomething(detail) ? 'info' : 'debug']({ kind, ...detail }, 'scheduled task finished');
      } catch (error) {
        await deps.db
          .query(sql.unsafe`
        insert into scheduled_job_runs (identifier, task, scheduled_for, started_at, finished_at, status, error)
        values (${identifier}, ${kind}, ${info.scheduledFor}, ${startedAt.toISOString()}, now(), 'failed', ${(error as Error).message})`)
          .catch(() => undefined);
        // PostgreSQL away (restarting, failing over) is no surprise: the task runs again at its next time.
        if (isDatabaseUnavailable(error))
          deps.logger.warn(
            { kind, reason: (error as Error).message },
            'scheduled task could not reach the database; it runs again at its next time',
          );
        else deps.logger.error({ err: error, kind }, 'scheduled task failed');
        throw error;
      }
    };
  return { kind, build };
}

/** Whether a run's detail says it did something: a count above zero, or a list with something in it, at any depth. */
export function didSomething(value: unknown): boolean {
  if (typeof value === 'number') return value > 0;
  if (Array.isArray(value)) return value.some((x) => (typeof x === 'object' && x !== null ? didSomething(x) : true));
  if (value && typeof value === 'object') return Object.values(value).some(didSomething);
  return false;
}
