// Wakes parked jobs (core/jobs/park.ts) when their time comes. A process sets
// a timer for the jobs it parked itself, and every sweep interval it wakes
// whatever is due, which covers jobs parked by a process that has stopped.
// wake_parked_jobs() tells every worker there is work (jobs:insert). The same
// sweep folds the counts of jobs that ended into the accounts' unfinished-job
// counters (fold_open_job_drops, migration 0037).
import type { Logger } from 'pino';
import type { DatabasePool } from '../core/db/pool.ts';
import { sql } from '../core/db/pool.ts';
import { wakeParkedJobs } from '../core/jobs/park.ts';

export class ParkedJobWaker {
  private timer: NodeJS.Timeout | null = null;
  /** Due times of jobs this process parked, earliest first (capped: the sweep covers the rest). */
  private pending: number[] = [];
  private readonly sweep: NodeJS.Timeout;
  private stopped = false;

  constructor(
    private readonly db: DatabasePool,
    private readonly logger: Logger,
    sweepMs: number,
  ) {
    this.sweep = setInterval(() => {
      void this.wake();
      void this.fold();
    }, sweepMs);
    this.sweep.unref();
  }

  /** A job of this process was parked until `until`. */
  parked(until: Date): void {
    if (this.stopped) return;
    const at = until.getTime();
    const i = this.pending.findIndex((t) => t > at);
    if (i === -1) this.pending.push(at);
    else this.pending.splice(i, 0, at);
    if (this.pending.length > MAX_PENDING) this.pending.length = MAX_PENDING;
    if (this.pending[0] === at) this.arm();
  }

  private arm(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    const next = this.pending[0];
    if (next === undefined || this.stopped) return;
    // A few ms late rather than early: the row's time must have passed in the database.
    this.timer = setTimeout(() => {
      const now = Date.now();
      while (this.pending.length > 0 && this.pending[0]! <= now) this.pending.shift();
      void this.wake();
      this.arm();
    }, Math.max(0, next - Date.now()) + 5);
    this.timer.unref();
  }

  private async wake(): Promise<void> {
    if (this.stopped) return;
    try {
      const woken = await wakeParkedJobs(this.db);
      if (woken > 0) this.logger.debug({ woken }, 'woke parked jobs');
    } catch (error) {
      this.logger.debug({ err: error }, 'could not wake parked jobs; the next sweep will');
    }
  }

  private async fold(): Promise<void> {
    if (this.stopped) return;
    try {
      await this.db.query(sql.unsafe`select fold_open_job_drops()`);
    } catch (error) {
      this.logger.debug({ err: error }, 'could not fold the counts of finished jobs; the next sweep will');
    }
  }

  stop(): void {
    this.stopped = true;
    clearInterval(this.sweep);
    if (this.timer) clearTimeout(this.timer);
  }
}

const MAX_PENDING = 10_000;
