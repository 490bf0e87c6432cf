// What a worker process writes for its jobs, batched across the jobs that
// start or finish at about the same time (core/db/batcher.ts): the status
// reads that open attempts, and the results. A result is committed before
// its job is let go to Graphile Worker; a batch that fails is written again
// item by item, so one bad result fails only its own job.
import type { Logger } from 'pino';
import type { CommonQueryMethods } from '../db/pool.ts';
import { StatementBatcher } from '../db/batcher.ts';
import { completeJobs, openAttempts, type Completion } from './lifecycle.ts';

export class JobCompletions {
  private readonly opens: StatementBatcher<string, boolean>;
  private readonly results: StatementBatcher<Completion, boolean>;

  constructor(db: CommonQueryMethods, logger: Logger) {
    this.opens = new StatementBatcher((ids) => openAttempts(db, ids), (id) => id, { what: 'attempt start', logger });
    this.results = new StatementBatcher(
      async (completions) => {
        const recorded = await completeJobs(db, completions);
        return completions.map((c) => recorded.has(c.jobId));
      },
      (c) => c.jobId,
      { what: 'job completion', logger },
    );
  }

  /** Whether an attempt of this job should run (see openAttempts). */
  open(jobId: string): Promise<boolean> {
    return this.opens.submit(jobId);
  }

  /** Records the result; false when the job is no longer this attempt's to finish. */
  complete(completion: Completion): Promise<boolean> {
    return this.results.submit(completion);
  }
}
