// maintenance.dead_workers: unlocks jobs of workers whose heartbeat is stale,
// wakes jobs that lost their wake-up, then schedules its own next run
// (core/maintenance/dead-worker-sweep.ts).
import { rewakeOrphans, sweepDeadWorkers } from '../../core/jobs/liveness.ts';
import { DEAD_WORKER_SWEEP_TASK, scheduleDeadWorkerSweep } from '../../core/maintenance/dead-worker-sweep.ts';
import { defineScheduledTask } from '../define-scheduled-task.ts';

export default defineScheduledTask(
  DEAD_WORKER_SWEEP_TASK,
  async ({ db, config, logger }) => {
    try {
      const result = await sweepDeadWorkers(db, config.worker.staleAfterMs);
      if (result.unlockedWorkers.length > 0) {
        logger.warn(result, 'released the jobs of workers that stopped heart-beating');
      }
      const rewoken = await rewakeOrphans(db);
      if (rewoken > 0) logger.warn({ rewoken }, 'woke unfinished jobs that had no wake-up in the queue');
      return { ...result, rewoken };
    } finally {
      await scheduleDeadWorkerSweep(db, config.worker.sweepIntervalMs, false);
    }
  },
  // Every 15 s is too often to record; keep the runs that released something.
  { record: (detail) => (detail.unlockedWorkers as string[]).length > 0 || Number(detail.rewoken) > 0 },
);
