// Cron items (schedules/index.ts) with their last run (its start, from
// scheduled_job_last_runs, which every run writes, and its outcome when the
// task recorded one in scheduled_job_runs: a run that found nothing to do is
// not recorded), when each fires next (the item's own matcher, UTC as
// Graphile's cron) and the runs the tasks recorded.
import type { CronItem, parseCronItems as ParseCronItems } from 'graphile-worker';
import { z } from 'zod';
import { sql, type CommonQueryMethods } from '../db/pool.ts';

const RunRow = z.object({
  id: z.number(),
  identifier: z.string(),
  task: z.string(),
  scheduled_for: z.string().nullable(),
  started_at: z.string(),
  finished_at: z.string().nullable(),
  status: z.string(),
  detail: z.unknown(),
  error: z.string().nullable(),
});
export type ScheduleRun = z.infer<typeof RunRow>;

export type ScheduleView = {
  identifier: string;
  task: string;
  match: string;
  /** When the last run was due (its cron time; its start when it was run by hand). */
  lastFiredAt: string | null;
  /** The last run's recorded outcome; null when it did nothing worth recording (or has not finished yet). */
  lastRun: ScheduleRun | null;
  nextAt: string | null;
  runs: readonly ScheduleRun[];
};

/** The next minute (UTC, after `from`) the item matches; null if none within a year. */
export function nextMatch(item: CronItem, from: Date, parseCronItems: typeof ParseCronItems): Date | null {
  const [parsed] = parseCronItems([item]);
  const ts = new Date(from);
  ts.setUTCSeconds(0, 0);
  for (let i = 0; i < 366 * 24 * 60; i++) {
    ts.setUTCMinutes(ts.getUTCMinutes() + 1);
    const digest = {
      min: ts.getUTCMinutes(),
      hour: ts.getUTCHours(),
      date: ts.getUTCDate(),
      month: ts.getUTCMonth() + 1,
      dow: ts.getUTCDay(),
    };
    if (parsed!.match(digest)) return ts;
  }
  return null;
}

/** How a run of the item names itself in scheduled_job_runs (define-scheduled-task.ts: its job key, else its task). */
const runIdentifier = (item: CronItem) => item.options?.jobKey ?? item.task;

export async function readSchedules(
  db: CommonQueryMethods,
  items: readonly CronItem[],
  runsEach = 5,
): Promise<ScheduleView[]> {
  const names = items.map(runIdentifier);
  const fired = await db.any(sql.type(z.object({ identifier: z.string(), at: z.string(), started_at: z.string() }))`
    select identifier, coalesce(scheduled_for, started_at)::text as at, started_at::text from scheduled_job_last_runs where identifier = any(${sql.array(names, 'text')})`);
  const firedAt = new Map(fired.map((r) => [r.identifier, r]));
  const runs = await db.any(sql.type(RunRow)`
    select r.* from unnest(${sql.array(names, 'text')}) as n(identifier)
    cross join lateral (
      select id::int, identifier, task, scheduled_for, started_at, finished_at, status, detail, error
      from scheduled_job_runs s where s.identifier = n.identifier order by s.started_at desc, s.id desc limit ${runsEach}
    ) r`);
  const now = new Date();
  // Graphile Worker's own matcher, loaded by the first look at the page (an api process needs it nowhere else).
  const { parseCronItems } = await import('graphile-worker');
  return items.map((item) => {
    const last = firedAt.get(runIdentifier(item));
    const own = runs.filter((r) => r.identifier === runIdentifier(item));
    // The recorded run of that same start, if the task recorded it.
    const lastRun = last
      ? (own.find((r) => new Date(r.started_at).getTime() === new Date(last.started_at).getTime()) ?? null)
      : null;
    return {
      identifier: item.identifier ?? item.task,
      task: item.task,
      match: typeof item.match === 'string' ? item.match : '(function)',
      lastFiredAt: last?.at ?? null,
      lastRun,
      nextAt: nextMatch(item, now, parseCronItems)?.toISOString() ?? null,
      runs: own,
    };
  });
}
