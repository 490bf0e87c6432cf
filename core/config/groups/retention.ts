// How long rows that grow with traffic are kept by the hourly sweep.
import { group, setting } from '../declare.ts';
import { intFromEnv } from '../parsers.ts';

export const retention = group(
  'Retention periods',
  'What the hourly sweep deletes, table by table, is under [Retention](#retention).',
  {
    JOB_RETENTION_DAYS: setting(intFromEnv(1, 3650), {
      default: 30,
      doc: 'Finished jobs older than this are deleted by the hourly sweep',
    }),
    // Above the 366 days usage may be back-dated: a day's rollup is recomputed
    // from its raw records, so a late record must never meet a swept day.
    USAGE_RECORD_RETENTION_DAYS: setting(intFromEnv(368, 3650), {
      default: 400,
      doc: 'Raw usage records older than this are deleted once their day is rolled up (at least 368: usage may be back-dated 366 days)',
    }),
    EVENT_RETENTION_DAYS: setting(intFromEnv(1, 3650), {
      default: 90,
      doc: 'Processed Stripe and purchase webhook events, channel inbound updates, sent channel replies and closed invitations older than this are deleted',
    }),
  },
);
