// usage.rollup (every 10 minutes, schedules/): recomputes usage_daily for
// yesterday and today and for any day a late record was queued for. Whole
// days are recomputed, so a retried or overlapping run never counts twice.
import { rollup } from '../../core/usage/rollup.ts';
import { defineScheduledTask } from '../define-scheduled-task.ts';

export default defineScheduledTask('usage.rollup', async ({ db }) => {
  const { days } = await rollup(db);
  return { days: days.map((d) => ({ day: d.day, scope: d.scope, rows: d.rows, dequeued: d.dequeued })) };
});
