// maintenance.dead_workers: unlocks jobs of workers whose heartbeat is stale,
// then schedules its own next run WORKER_SWEEP_INTERVAL_MS later under one
// job key, so exactly one sweep chain exists across all worker replicas
// (cron's one-minute grain is too coarse for recovery within 60 s; the cron
// item in schedules/ only restarts the chain if it was ever lost).
import { sweepDeadWorkers } from '../../core/jobs/liveness.ts';
import { defineScheduledTask } from '../define-scheduled-task.ts';
import { sql, type CommonQueryMethods } from '../../core/db/pool.ts';

export const DEAD_WORKER_SWEEP_KEY = 'maintenance:dead_workers';

/** Puts the next sweep in the queue; with preserveRunAt an earlier pending one is kept. */
export async function scheduleDeadWorkerSweep(db: CommonQueryMethods, delayMs: number, preserveRunAt: boolean): Promise<void> {
  await db.query(sql.unsafe`
    select graphile_worker.add_job(
      'maintenance.dead_workers', '{}'::json,
      run_at => now() + make_interval(secs => ${delayMs / 1000}),
      max_attempts => 1,
      job_key => ${DEAD_WORKER_SWEEP_KEY},
      job_key_mode => ${preserveRunAt ? 'preserve_run_at' : 'replace'})`);
}

export default defineScheduledTask(
  'maintenance.dead_workers',
  async ({ db, config, logger }) => {
    try {
      const result = await sweepDeadWorkers(db, config.worker.staleAfterMs);
      if (result.unlockedWorkers.length > 0) {
        logger.warn(result, 'released the jobs of workers that stopped heart-beating');
      }
      return { ...result };
    } finally {
      await scheduleDeadWorkerSweep(db, config.worker.sweepIntervalMs, false);
    }
  },
  // Every 15 s is too often to record; keep the runs that released something.
  { record: (detail) => (detail.unlockedWorkers as string[]).length > 0 },
);
