// The dead-worker sweep runs as a chain: each run puts the next one in the
// queue WORKER_SWEEP_INTERVAL_MS later under one job key, so exactly one
// chain exists across all worker replicas (cron's one-minute grain is too
// coarse for recovery within seconds; the cron item in schedules/ only
// restarts the chain if it was ever lost).
import type { CommonQueryMethods } from '../db/pool.ts';
import { enqueueSystemJob } from '../jobs/enqueue.ts';

export const DEAD_WORKER_SWEEP_TASK = 'maintenance.dead_workers';
export const DEAD_WORKER_SWEEP_KEY = 'maintenance:dead_workers';

/** Puts the next sweep in the queue; with preserveRunAt an earlier pending one is kept. */
export async function scheduleDeadWorkerSweep(
  db: CommonQueryMethods,
  delayMs: number,
  preserveRunAt: boolean,
): Promise<void> {
  await enqueueSystemJob(db, {
    kind: DEAD_WORKER_SWEEP_TASK,
    key: DEAD_WORKER_SWEEP_KEY,
    runAt: new Date(Date.now() + delayMs),
    maxAttempts: 1,
    preserveRunAt,
  });
}
