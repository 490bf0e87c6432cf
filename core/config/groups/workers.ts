// Worker processes: their two pools, polling, liveness and cancellation.
import { group, setting } from '../declare.ts';
import { intFromEnv } from '../parsers.ts';

export const workers = group(
  'Workers',
  'How the pools share work: [Pools, fair shares, waits](jobs.md#pools-fair-shares-waits).',
  {
    WORKER_CONCURRENCY: setting(intFromEnv(1, 100), {
      default: 8,
      doc: 'Short and CPU-bound jobs one worker process runs at once (its short pool)',
    }),
    WORKER_IO_CONCURRENCY: setting(intFromEnv(1, 20_000), {
      default: 1_000,
      doc: 'Jobs that wait on a model or a channel one worker process holds at once (its I/O pool: chat turns, company runs, channel replies and links)',
    }),
    WORKER_FETCH_BATCH: setting(intFromEnv(1, 1_000), {
      default: 64,
      doc: 'Jobs the short pool fetches at once (at least `WORKER_CONCURRENCY`): more means fewer round trips, and more held ahead by a busy process',
    }),
    WORKER_IO_FETCH_BATCH: setting(intFromEnv(1, 1_000), {
      default: 1,
      doc: 'Jobs the I/O pool fetches at once (at most `WORKER_IO_CONCURRENCY`): a process whose slots are all busy holds them until one frees, and a job ahead in the fair order that arrives later waits behind them, so keep it small',
    }),
    WORKER_POLL_INTERVAL_MS: setting(intFromEnv(50, 600_000), {
      default: 2_000,
      doc: 'Poll for delayed and retried jobs (new jobs arrive by LISTEN at once)',
    }),
    WORKER_HEARTBEAT_MS: setting(intFromEnv(100, 600_000), {
      default: 5_000,
      doc: 'How often a worker process marks itself alive',
    }),
    WORKER_STALE_AFTER_MS: setting(intFromEnv(500, 3_600_000), {
      default: 20_000,
      doc: 'A heartbeat older than this means the worker is dead',
    }),
    WORKER_SWEEP_INTERVAL_MS: setting(intFromEnv(500, 3_600_000), {
      default: 15_000,
      doc: 'How often the dead-worker sweep runs',
    }),
    JOB_CANCEL_GRACE_MS: setting(intFromEnv(100, 600_000), {
      default: 5_000,
      doc: 'How long a cancelled running job may take to stop before the worker cuts it off',
    }),
    WORKER_RUNNING_AFTER_MS: setting(intFromEnv(0, 600_000), {
      default: 50,
      doc: 'A job still at work after this long is marked `running`; quicker ones go from `queued` to their result in one write',
    }),
  },
);
