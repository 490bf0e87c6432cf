// Rows that expire: each area that keeps short-lived rows (idempotency
// records, claim attempts, rate-limit windows, ...) adds an entry here and
// the hourly sweep deletes what has expired, in bounded batches.
import { sql, type DatabasePool } from '../db/pool.ts';
import type { Config } from '../config.ts';

type ExpiringRows = {
  name: string;
  /** A delete of at most `limit` expired rows; returns how many it removed. */
  deleteBatch: (db: DatabasePool, config: Config, limit: number) => Promise<number>;
};

export const EXPIRING_ROWS: ExpiringRows[] = [
  {
    name: 'finished jobs past retention',
    deleteBatch: async (db, config, limit) =>
      (
        await db.query(sql.unsafe`
          delete from jobs where id in (
            select id from jobs
            where finished_at < now() - make_interval(days => ${config.jobRetentionDays})
            limit ${limit})`)
      ).rowCount,
  },
  {
    name: 'scheduled job runs older than 30 days',
    deleteBatch: async (db, _config, limit) =>
      (
        await db.query(sql.unsafe`
          delete from scheduled_job_runs where id in (
            select id from scheduled_job_runs where started_at < now() - interval '30 days' limit ${limit})`)
      ).rowCount,
  },
  {
    name: 'stale worker heartbeats',
    deleteBatch: async (db, _config, limit) =>
      (
        await db.query(sql.unsafe`
          delete from worker_heartbeats where worker_id in (
            select worker_id from worker_heartbeats where last_seen_at < now() - interval '1 day' limit ${limit})`)
      ).rowCount,
  },
];

export async function sweepExpiredRows(db: DatabasePool, config: Config, batchSize = 1000): Promise<Record<string, number>> {
  const removed: Record<string, number> = {};
  for (const entry of EXPIRING_ROWS) {
    let total = 0;
    for (;;) {
      const n = await entry.deleteBatch(db, config, batchSize);
      total += n;
      if (n < batchSize) break;
    }
    removed[entry.name] = total;
  }
  return removed;
}
