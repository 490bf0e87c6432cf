// console.sample_queue (every minute, schedules/): one sample of the queue
// for the console's charts (core/console/samples.ts), with the cron items'
// own tasks (this one among them) counted apart from the work. Not recorded
// as a run: it would be one row a minute saying the same thing.
import { takeQueueSample } from '../../core/console/samples.ts';
import { CRON_ITEMS } from '../../schedules/index.ts';
import { defineScheduledTask } from '../define-scheduled-task.ts';

const UPKEEP_TASKS = CRON_ITEMS.map((item) => item.task);

export default defineScheduledTask(
  'console.sample_queue',
  async ({ db }, { scheduledFor }) => {
    await takeQueueSample(db, scheduledFor ? new Date(scheduledFor) : new Date(), UPKEEP_TASKS);
    return {};
  },
  { record: () => false },
);
