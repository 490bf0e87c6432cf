// maintenance.sweep_expired (hourly, schedules/): deletes expired rows.
import { sweepExpiredRows } from '../../core/maintenance/expired-rows.ts';
import { defineScheduledTask } from '../define-scheduled-task.ts';

export default defineScheduledTask('maintenance.sweep_expired', async ({ db, config }) => ({
  removed: await sweepExpiredRows(db, config),
}));
