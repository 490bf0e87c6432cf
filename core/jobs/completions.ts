// What a worker process writes for its jobs, batched across the jobs that
// start or finish at about the same time (core/db/batcher.ts): the status
// reads that open attempts, the claims of serial queues, and the results;
// and the progress they report. A batch that fails is written
// again item by item, so one bad result fails only its own job (and
// workers/attempt.ts fails or retries that job: it never stays running).
//
// These statements run on a small pool of their own, in plain node-postgres
// with prepared statements, and their commits do not wait for the WAL flush
// (synchronous_commit = off). A worker slot does not wait for its result to
// be written (workers/attempt.ts): results of jobs that end together go in
// one statement, and the slot takes its next job meanwhile. Should the
// worker or PostgreSQL die before a result is written, the job is left
// unfinished without a wake-up, and the dead-worker sweep runs it again
// (jobs_rewake_orphans): at least once, never two results. Measured per
// statement, the two choices halve the CPU a completion costs.
import type { Logger } from 'pino';
import { StatementBatcher } from '../db/batcher.ts';
import {
  claimQueues,
  completeJobs,
  openAttempts,
  reportProgress,
  type AttemptStart,
  type Completion,
  type Holder,
  type PreparedQueryable,
  type QueueClaim,
} from './lifecycle.ts';

/** A pool that hands out connections (workers/graphile-pool.ts waits through outages). */
export type ConnectionSource = {
  connect: () => Promise<PreparedQueryable & { release: (error?: Error | boolean) => void }>;
};

const PREFETCH_FRESH_MS = 30_000;
const PREFETCH_MAX = 10_000;

export class JobCompletions {
  private readonly opens: StatementBatcher<string, AttemptStart>;
  private readonly claims: StatementBatcher<{ queue: string; holder: string }, QueueClaim>;
  private readonly results: StatementBatcher<Completion, boolean>;
  private readonly db: PreparedQueryable;

  constructor(pool: ConnectionSource, logger: Logger) {
    const db: PreparedQueryable = {
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
    };
    this.db = db;
    this.opens = new StatementBatcher(
      async (ids) => (await openAttempts(db, ids)).map((value) => ({ ok: true as const, value })),
      { key: (id) => id, what: 'attempt start', logger, maxInFlight: 1 },
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
      { key: (c) => c.jobId, what: 'job completion', logger, maxInFlight: 1 },
    );
  }

  /** Reads started for wake-ups a worker fetched and has not started yet, with when (see prefetch). */
  private readonly prefetched = new Map<string, { at: number; start: Promise<AttemptStart> }>();

  /**
   * Starts the reads of wake-ups a worker pool just fetched in a batch, so
   * they cost one statement, and a slot that takes one finds its read done.
   * A cancel that comes in between reaches the worker by job_cancel, as it
   * would after a read at the start; a read older than PREFETCH_FRESH_MS is
   * made again.
   */
  prefetch(jobIds: readonly string[]): void {
    const now = performance.now();
    for (const id of jobIds) {
      if (this.prefetched.has(id)) continue;
      const start = this.opens.submit(id);
      start.catch(() => undefined); // the slot that takes it sees the error, or it ages out
      this.prefetched.set(id, { at: now, start });
    }
    // Insertion order is age order: the oldest go first.
    for (const [id, entry] of this.prefetched) {
      if (this.prefetched.size <= PREFETCH_MAX && now - entry.at < PREFETCH_FRESH_MS) break;
      this.prefetched.delete(id);
    }
  }

  /** What a wake-up of this job finds (see openAttempts). */
  open(jobId: string): Promise<AttemptStart> {
    const entry = this.prefetched.get(jobId);
    this.prefetched.delete(jobId);
    if (entry && performance.now() - entry.at < PREFETCH_FRESH_MS) return entry.start;
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

  /** Results submitted and not yet written (drain() waits for them). */
  private readonly pending = new Set<Promise<unknown>>();

  /** Records the result; false when the job is no longer this attempt's to finish. */
  complete(completion: Completion): Promise<boolean> {
    const written = this.results.submit(completion);
    const tracked = written.catch(() => undefined).finally(() => this.pending.delete(tracked));
    this.pending.add(tracked);
    return written;
  }

  /** Adds work that follows a result's write (it never rejects) to what drain() waits for. */
  track(followUp: Promise<unknown>): void {
    const tracked = followUp.finally(() => this.pending.delete(tracked));
    this.pending.add(tracked);
  }

  /** Waits until every result submitted so far is written (or failed): before the worker stops. */
  async drain(): Promise<void> {
    while (this.pending.size > 0) await Promise.all([...this.pending]);
  }
}
