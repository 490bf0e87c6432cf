// What a worker process writes for its jobs, batched across the jobs that
// start or finish at about the same time (core/db/batcher.ts): the status
// reads that open attempts, the claims of serial queues, and the results;
// and the progress they report. A batch that fails is written
// again item by item, so one bad result fails only its own job.
//
// These statements run on a small pool of their own, in plain node-postgres
// with prepared statements, and their commits do not wait for the WAL flush
// (synchronous_commit = off). That is safe for "one recorded result per
// job": a result is committed before its job is let go, and Graphile
// Worker's completion that follows is an ordinary durable commit, which
// flushes the WAL up to and past the result. If PostgreSQL crashes before
// that, both are lost together and the job runs again. Measured per
// statement, the two choices halve the CPU a completion costs.
import type { Logger } from 'pino';
import { StatementBatcher } from '../db/batcher.ts';
import { claimQueues, completeJobs, openAttempts, reportProgress, type AttemptStart, type Completion, type Holder, type PreparedQueryable, type QueueClaim } from './lifecycle.ts';

/** A pool that hands out connections (workers/graphile-pool.ts waits through outages). */
export type ConnectionSource = {
  connect: () => Promise<PreparedQueryable & { release: (error?: Error | boolean) => void }>;
};

export class JobCompletions {
  private readonly opens: StatementBatcher<string, AttemptStart>;
  private readonly claims: StatementBatcher<{ queue: string; holder: string }, QueueClaim>;
  private readonly results: StatementBatcher<Completion, boolean>;
  private readonly db: PreparedQueryable;

  constructor(pool: ConnectionSource, logger: Logger) {
    const db: PreparedQueryable = (this.db = {
      query: async (statement) => {
        const client = await pool.connect();
        let failure: Error | undefined;
        try {
          return await client.query(statement);
        } catch (error) {
          failure = error as Error;
          throw error;
        } finally {
          client.release(failure);
        }
      },
    });
    this.opens = new StatementBatcher(
      async (ids) => (await openAttempts(db, ids)).map((value) => ({ ok: true as const, value })),
      { key: (id) => id, what: 'attempt start', logger },
    );
    this.claims = new StatementBatcher(
      async (items) => (await claimQueues(db, items)).map((value) => ({ ok: true as const, value })),
      { key: (c) => c.queue, what: 'queue claim', logger },
    );
    this.results = new StatementBatcher(
      async (completions) => {
        const recorded = await completeJobs(db, completions);
        return completions.map((c) => ({ ok: true as const, value: recorded.has(c.jobId) }));
      },
      { key: (c) => c.jobId, what: 'job completion', logger },
    );
  }

  /** What a wake-up of this job finds (see openAttempts). */
  open(jobId: string): Promise<AttemptStart> {
    return this.opens.submit(jobId);
  }

  /** Claims the next job of a serial queue for this worker pool (see claimQueues). */
  claim(queue: string, holder: string): Promise<QueueClaim> {
    return this.claims.submit({ queue, holder });
  }

  /** Publishes a job's progress (not batched: a task awaits each before the next, so they stay in order). */
  progress(jobId: string, attempt: number, value: unknown, holder: Holder): Promise<boolean> {
    return reportProgress(this.db, jobId, attempt, value, holder);
  }

  /** Records the result; false when the job is no longer this attempt's to finish. */
  complete(completion: Completion): Promise<boolean> {
    return this.results.submit(completion);
  }
}
