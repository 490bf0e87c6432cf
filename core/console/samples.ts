// The console's charts read one sample a minute (queue_samples, 0045),
// written by the queue_sample cron item: the queue as Graphile Worker holds it
// (wake-ups ready, running, waiting; the oldest ready one's wait) and the
// platform jobs that finished in the minute before. The platform's own upkeep
// (the cron items' tasks, the sampler itself among them) is counted apart
// (0051): left in, it showed load on an idle service.
import { z } from 'zod';
import { sql, type CommonQueryMethods } from '../db/pool.ts';
import { readQueueByKind } from '../queue-metrics.ts';

export const QueueSample = z.object({
  at: z.string(),
  ready: z.number(),
  running: z.number(),
  waiting: z.number(),
  oldest_ready_s: z.number().nullable(),
  succeeded: z.number(),
  failed: z.number(),
  /** Open wake-ups of upkeep tasks; null in samples from before they were counted apart. */
  upkeep: z.number().nullable(),
});
export type QueueSample = z.infer<typeof QueueSample>;

/**
 * Takes the sample of minute `at` (its start); a second call for the same
 * minute changes nothing. `upkeep` names the tasks that are the platform's
 * own upkeep (the cron items' tasks, schedules/): their wake-ups are left out
 * of ready, running, waiting and the oldest wait, and counted as `upkeep`.
 */
export async function takeQueueSample(
  db: CommonQueryMethods,
  at: Date,
  upkeep: Iterable<string> = [],
): Promise<{ taken: boolean }> {
  const minute = new Date(Math.floor(at.getTime() / 60_000) * 60_000);
  const upkeepKinds = new Set(upkeep);
  const all = await readQueueByKind(db);
  const queue = all.filter((q) => !upkeepKinds.has(q.kind));
  const sum = (rows: typeof all, pick: (q: (typeof all)[number]) => number) => rows.reduce((n, q) => n + pick(q), 0);
  const oldest = queue.reduce<number | null>(
    (max, q) => (q.oldest_ready_s !== null && (max === null || q.oldest_ready_s > max) ? q.oldest_ready_s : max),
    null,
  );
  const upkeepOpen = sum(
    all.filter((q) => upkeepKinds.has(q.kind)),
    (q) => q.ready + q.running + q.waiting,
  );
  const written = await db.query(sql.unsafe`
    insert into queue_samples (at, ready, running, waiting, oldest_ready_s, succeeded, failed, upkeep)
    select ${minute.toISOString()}, ${sum(queue, (q) => q.ready)}, ${sum(queue, (q) => q.running)}, ${sum(queue, (q) => q.waiting)}, ${oldest},
      count(*) filter (where status = 'succeeded'), count(*) filter (where status = 'failed'), ${upkeepOpen}
    from jobs where finished_at >= ${minute.toISOString()}::timestamptz - interval '1 minute' and finished_at < ${minute.toISOString()}
    on conflict (at) do nothing`);
  return { taken: written.rowCount > 0 };
}

/** The samples of the last `minutes` minutes, oldest first. */
export async function readQueueSamples(db: CommonQueryMethods, minutes = 60): Promise<readonly QueueSample[]> {
  return db.any(sql.type(QueueSample)`
    select to_char(at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI"Z"') as at, ready, running, waiting, oldest_ready_s, succeeded, failed, upkeep
    from queue_samples where at > now() - make_interval(mins => ${minutes}) order by at`);
}
