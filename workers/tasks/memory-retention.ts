// memory.retention (daily, schedules/): deletes memory files not written for
// longer than their tenant's retention (MEMORY_DEFAULTS.retentionDays without
// settings). Every run is recorded in scheduled_job_runs, so /api/activity/cron-jobs shows it.
import { deleteExpiredMemoryFiles } from '../../core/memory/files.ts';
import { MEMORY_DEFAULTS } from '../../core/memory/settings.ts';
import { defineScheduledTask } from '../define-scheduled-task.ts';

export default defineScheduledTask('memory.retention', async ({ db }) => ({
  deleted: await deleteExpiredMemoryFiles(db, MEMORY_DEFAULTS.retentionDays),
}));
