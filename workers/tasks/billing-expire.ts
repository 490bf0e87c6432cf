// billing.expire (every minute, schedules/): a grant with an end (an in-app
// purchase that was not renewed) ends without any event; this moves such
// tenants to what they are still entitled to. Runs are recorded only when
// something expired, so a quiet minute leaves no row behind.
import { refreshExpiredPlans } from '../../core/billing/entitlements.ts';
import { defineScheduledTask } from '../define-scheduled-task.ts';

export default defineScheduledTask('billing.expire', async ({ db }) => ({ expired: await refreshExpiredPlans(db) }), {
  record: (detail) => (detail.expired as number) > 0,
});
