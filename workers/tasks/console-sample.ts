// console.sample_queue (every minute, schedules/): one sample of the queue
// for the console's charts (core/console/samples.ts). Not recorded as a run:
// it would be one row a minute saying the same thing.
import { takeQueueSample } from '../../core/console/samples.ts';
import { defineScheduledTask } from '../define-scheduled-task.ts';

export default defineScheduledTask(
  'console.sample_queue',
  async ({ db }, { scheduledFor }) => {
    await takeQueueSample(db, scheduledFor ? new Date(scheduledFor) : new Date());
    return {};
  },
  { record: () => false },
);
