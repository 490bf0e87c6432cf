// maintenance.sweep_expired (hourly, schedules/): deletes expired rows, and
// Graphile Worker's queue rows that no job uses. Every chat session (and
// channel) leaves a named queue behind, and each fetch that meets a queued
// job locks every idle queue row: with 20,000 of them a fetch took 11 ms
// instead of 0.15 ms. A queue row comes back with the next job of its queue.
import { collectIdleQueues } from '../../core/jobs/idle-queues.ts';
import { sweepExpiredRows } from '../../core/maintenance/expired-rows.ts';
import { defineScheduledTask } from '../define-scheduled-task.ts';

export default defineScheduledTask('maintenance.sweep_expired', async ({ db, config }) => {
  const removed = await sweepExpiredRows(db, config);
  const idle = await collectIdleQueues(db);
  return { removed, idleQueuesCollected: idle ?? 'not this time: queue rows were being written for longer than the lock wait' };
});
