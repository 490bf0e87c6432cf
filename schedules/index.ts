// Cron items run by Graphile Worker's own cron: each fires once across all
// worker replicas. An identifier is fixed forever (it is how Graphile Worker
// remembers what already ran); change the schedule, never the identifier.
// The platform's upkeep has priority -1: when due it goes before tenants'
// work, whose fair order is in run_at (docs/engine.md).
import type { CronItem } from 'graphile-worker';
import { DEAD_WORKER_SWEEP_KEY } from '../core/maintenance/dead-worker-sweep.ts';

export const CRON_ITEMS: CronItem[] = [
  {
    identifier: 'sweep_expired_rows',
    task: 'maintenance.sweep_expired',
    match: '17 * * * *', // hourly, off the top of the hour
    options: { backfillPeriod: 0, priority: -1, maxAttempts: 3 },
  },
  {
    // Restarts the self-scheduling dead-worker sweep if its chain was lost.
    identifier: 'dead_worker_sweep',
    task: 'maintenance.dead_workers',
    match: '* * * * *',
    options: {
      backfillPeriod: 0,
      priority: -1,
      maxAttempts: 1,
      jobKey: DEAD_WORKER_SWEEP_KEY,
      jobKeyMode: 'preserve_run_at',
    },
  },
  {
    // Recomputes usage_daily (whole days, so a late or repeated run is harmless).
    identifier: 'usage_rollup',
    task: 'usage.rollup',
    match: '*/10 * * * *',
    options: { backfillPeriod: 0, priority: -1, maxAttempts: 3, jobKey: 'usage_rollup', jobKeyMode: 'preserve_run_at' },
  },
  {
    // Ends grants whose time ran out (in-app purchases without a renewal).
    identifier: 'billing_expire',
    task: 'billing.expire',
    match: '* * * * *',
    options: {
      backfillPeriod: 0,
      priority: -1,
      maxAttempts: 1,
      jobKey: 'billing_expire',
      jobKeyMode: 'preserve_run_at',
    },
  },
  {
    // One sample of the queue a minute for the console's charts.
    identifier: 'queue_sample',
    task: 'console.sample_queue',
    match: '* * * * *',
    options: { backfillPeriod: 0, priority: -1, maxAttempts: 1, jobKey: 'queue_sample', jobKeyMode: 'preserve_run_at' },
  },
  {
    // Deletes memory files past their tenant's retention (days, so daily is enough).
    identifier: 'memory_retention',
    task: 'memory.retention',
    match: '23 3 * * *',
    options: {
      backfillPeriod: 0,
      priority: -1,
      maxAttempts: 3,
      jobKey: 'memory_retention',
      jobKeyMode: 'preserve_run_at',
    },
  },
];
