// Graphile Worker's queue rows that no job uses are deleted hourly
// (maintenance.sweep_expired): every chat session and channel leaves one.
//
// Graphile's own cleanup (GC_JOB_QUEUES) deletes them while jobs are being
// added: a send that found its session's idle queue row, and then wrote its
// job naming that row, could lose the row in between, leaving a job no
// worker ever fetches. Here the delete runs with the queue table locked in
// EXCLUSIVE mode, which waits for every transaction that writes or locks
// queue rows (a chat send round takes ROW SHARE, 0035; Graphile's add_jobs and
// fetches write them) and lets none start until it commits; it decides after
// the lock is granted, so it sees every job committed before. If the lock is
// not granted quickly (a long transaction holds it), it gives up until the
// next sweep rather than make sends queue behind it.
import { z } from 'zod';
import { sqlState } from '../db/errors.ts';
import { sql, type DatabasePool } from '../db/pool.ts';

// While it waits, sends queue behind its lock request: keep the wait short.
const LOCK_WAIT = '100ms';

class LockNotGranted extends Error {}

/** How many idle queue rows were deleted; null when the lock was not granted (next sweep). */
export async function collectIdleQueues(db: DatabasePool): Promise<number | null> {
  try {
    return await db.transaction(async (tx) => {
      await tx.query(sql.unsafe`select set_config('lock_timeout', ${LOCK_WAIT}, true)`);
      try {
        await tx.query(sql.unsafe`lock table graphile_worker._private_job_queues in exclusive mode`);
      } catch (error) {
        if (sqlState(error) === '55P03') throw new LockNotGranted();
        throw error;
      }
      return tx.oneFirst(sql.type(z.object({ n: z.number() }))`
        with gone as (
          delete from graphile_worker._private_job_queues q
          where q.locked_at is null
            and not exists (select 1 from graphile_worker._private_jobs j where j.job_queue_id = q.id)
          returning 1)
        select count(*)::int as n from gone`);
    });
  } catch (error) {
    if (error instanceof LockNotGranted) return null;
    throw error;
  }
}
