// Cancelling running jobs. The platform marks a running job 'cancelling' (or
// 'cancelled', when its attempt had not written 'running' yet); a trigger
// NOTIFYs job_cancel with its id; the worker process holding it aborts the
// handler's AbortSignal. One LISTEN connection per worker process;
// after a reconnect it re-reads which of its running jobs were asked to stop
// meanwhile, so a cancel sent while the connection was down still arrives.
import type { Logger } from 'pino';
import { z } from 'zod';
import { sql, type DatabasePool } from '../core/db/pool.ts';
import { JobEventHub } from '../core/jobs/events.ts';

/** How long a cancel of a job this process does not run (yet) is remembered, and how many. */
const REMEMBER_MS = 60_000;
const REMEMBER_MAX = 10_000;

export class CancelListener {
  private readonly running = new Map<string, AbortController>();
  /**
   * Cancels of jobs no handler here was tracking, with when they arrived: a
   * cancel that lands between an attempt's wake-up (its read of the job,
   * workers/tickets.ts) and its handler's start is kept here and aborts the
   * handler as it starts. Most such cancels are of
   * jobs nobody runs; they age out.
   */
  private readonly early = new Map<string, number>();
  private readonly hub: JobEventHub;

  constructor(
    databaseUrl: string,
    private readonly db: DatabasePool,
    private readonly logger: Logger,
  ) {
    this.hub = new JobEventHub(databaseUrl, db, logger, { jobEvents: false, applicationName: 'worker-job-cancel' });
  }

  async start(): Promise<void> {
    await this.hub.start();
    await this.hub.listen('job_cancel', (jobId) => this.abort(jobId));
    this.hub.onConnectionChange((connected) => {
      if (connected) void this.recheck();
    });
  }

  stop(): Promise<void> {
    return this.hub.stop();
  }

  /** Tracks a job while its handler runs; the controller aborts when it is cancelled. */
  track(jobId: string): { signal: AbortSignal; untrack: () => void } {
    const controller = new AbortController();
    this.running.set(jobId, controller);
    if (this.early.delete(jobId)) controller.abort(new JobCancelledError());
    return {
      signal: controller.signal,
      untrack: () => this.running.get(jobId) === controller && this.running.delete(jobId),
    };
  }

  private abort(jobId: string): void {
    const controller = this.running.get(jobId);
    if (!controller) {
      this.remember(jobId);
      return;
    }
    if (controller.signal.aborted) return;
    this.logger.info({ jobId }, 'job cancelled while running; aborting its handler');
    controller.abort(new JobCancelledError());
  }

  private remember(jobId: string): void {
    const now = Date.now();
    this.early.set(jobId, now);
    // Insertion order is arrival order: the oldest go first.
    for (const [id, at] of this.early) {
      if (this.early.size <= REMEMBER_MAX && at > now - REMEMBER_MS) break;
      this.early.delete(id);
    }
  }

  private async recheck(): Promise<void> {
    const ids = [...this.running.keys()];
    if (ids.length === 0) return;
    try {
      const cancelled = await this.db.anyFirst(sql.type(z.object({ id: z.string() }))`
        select id from jobs where status in ('cancelling', 'cancelled') and id = any(${sql.array(ids, 'uuid')})`);
      for (const id of cancelled) this.abort(id);
    } catch (error) {
      this.logger.warn({ err: error }, 'could not re-read cancelled jobs after reconnecting');
    }
  }
}

/** The reason a cancelled job's signal carries. */
export class JobCancelledError extends Error {
  override name = 'JobCancelledError';
  constructor() {
    super('The job was cancelled.');
  }
}
