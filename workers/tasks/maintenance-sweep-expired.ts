// maintenance.sweep_expired (hourly, schedules/): deletes expired rows, and
// tidies Graphile Worker's tables with its own cleanup: queue rows no job
// uses (the platform adds no named queues itself, so any such row is left
// over) and jobs that used up their attempts (a platform job whose
// wake-up did is woken again by the dead-worker sweep).
import { makeWorkerUtils } from 'graphile-worker';
import { graphileLogger } from '../../core/graphile-logger.ts';
import { sweepExpiredRows } from '../../core/maintenance/expired-rows.ts';
import { defineScheduledTask } from '../define-scheduled-task.ts';

const GRAPHILE_CLEANUP = ['GC_JOB_QUEUES', 'DELETE_PERMAFAILED_JOBS'] as const;

export default defineScheduledTask('maintenance.sweep_expired', async ({ db, config, graphilePool, logger }) => {
  const removed = await sweepExpiredRows(db, config);
  const utils = await makeWorkerUtils({ pgPool: graphilePool, logger: graphileLogger(logger) });
  try {
    await utils.cleanup({ tasks: [...GRAPHILE_CLEANUP] });
  } finally {
    await utils.release();
  }
  return { removed, graphileCleanup: [...GRAPHILE_CLEANUP] };
});
