// Rows that expire: each area that keeps short-lived rows (idempotency
// records, claim attempts, rate-limit windows, ...) adds an entry here and
// the hourly sweep deletes what has expired, in bounded batches so a large
// backlog never holds long locks.
import { sql, type DatabasePool } from '../db/pool.ts';
import type { Config } from '../config.ts';

type FragmentSqlToken = ReturnType<typeof sql.fragment>;

type ExpiringRows = {
  name: string;
  table: string;
  key: string;
  /** The condition that marks a row as expired. */
  expired: (config: Config) => FragmentSqlToken;
};

export const EXPIRING_ROWS: ExpiringRows[] = [
  {
    name: 'finished jobs past retention',
    table: 'jobs',
    key: 'id',
    expired: (config) => sql.fragment`finished_at < now() - make_interval(days => ${config.jobRetentionDays})`,
  },
  {
    name: 'scheduled job runs older than 30 days',
    table: 'scheduled_job_runs',
    key: 'id',
    expired: () => sql.fragment`started_at < now() - interval '30 days'`,
  },
  {
    name: 'stale worker heartbeats',
    table: 'worker_heartbeats',
    key: 'worker_id',
    expired: () => sql.fragment`last_seen_at < now() - interval '1 day'`,
  },
];

export async function sweepExpiredRows(db: DatabasePool, config: Config, batchSize = 1000): Promise<Record<string, number>> {
  const removed: Record<string, number> = {};
  for (const entry of EXPIRING_ROWS) {
    const table = sql.identifier([entry.table]);
    const key = sql.identifier([entry.key]);
    let total = 0;
    for (;;) {
      const { rowCount } = await db.query(sql.unsafe`
        delete from ${table} where ${key} in (
          select ${key} from ${table} where ${entry.expired(config)} limit ${batchSize})`);
      total += rowCount;
      if (rowCount < batchSize) break;
    }
    removed[entry.name] = total;
  }
  return removed;
}
