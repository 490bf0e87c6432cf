import { InvalidInputError } from 'slonik';
import { errorChain, sqlState } from '../db/errors.ts';

// A task throws PermanentJobError when retrying cannot help (bad key, model
// not allowed, invalid input): the job fails at once with this code, which
// the client sees in JobStatus.error. Any other error is retried with backoff.
export class PermanentJobError extends Error {
  override name = 'PermanentJobError';
  constructor(
    public readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/**
 * A transient failure with a stable code (provider 429/5xx, timeouts). With
 * `retryAfterMs` (a Retry-After the other side sent) the next attempt comes
 * then instead of after the usual backoff.
 */
export class RetryableJobError extends Error {
  override name = 'RetryableJobError';
  constructor(
    public readonly code: string,
    message: string,
    public readonly retryAfterMs?: number,
    /** What the other side did, for the log line (the message is what clients read). */
    public readonly detail?: string,
  ) {
    super(message);
  }
}

/**
 * Not a failure: the task has to wait for the outside world (a runner to
 * pick up work, say) and asks to run again after `delayMs`. The attempt ends
 * and gives its worker slot back; the job runs again then as the same
 * attempt (core/jobs/lifecycle.ts waitJob), with `progress` kept for it when
 * given. A job of a serial queue holds its queue while it waits, unless
 * `leaveQueue` (it then runs on outside the queue).
 */
export class JobWait extends Error {
  override name = 'JobWait';
  constructor(
    public readonly delayMs: number,
    public readonly reason: string,
    public readonly progress?: unknown,
    public readonly leaveQueue = false,
  ) {
    super(reason);
  }
}

/** The backoff before attempt `attempt + 1` after a failure: e^min(attempt, 10) seconds, as Graphile Worker's own. */
export const backoffMs = (attempt: number) => Math.round(Math.exp(Math.min(attempt, 10)) * 1000);

/**
 * PostgreSQL refused the data itself (SQLSTATE class 22, data exception: a
 * NUL or a lone surrogate in text or jsonb, a value out of range), or slonik
 * did (its InvalidInputError, which is also how it reports PostgreSQL's 22P02
 * without the code). The same data fails the same way at every attempt, so
 * the job fails at once, as `unstorable_data`; null for any other error.
 */
export function unstorableDataError(error: unknown): PermanentJobError | null {
  if (error instanceof PermanentJobError || error instanceof RetryableJobError) return null;
  const state = sqlState(error);
  const refused = state?.startsWith('22')
    ? `SQLSTATE ${state}`
    : [...errorChain(error)].some((e) => e instanceof InvalidInputError)
      ? 'invalid input'
      : null;
  if (!refused) return null;
  return new PermanentJobError(
    'unstorable_data',
    `The database cannot store this job's data (${refused}); retrying would not help.`,
  );
}

/**
 * The database refused a job's result, not for an outage: its data (class
 * 22, unstorable_data above, failed at once) or anything else, such as a
 * constraint, a trigger or a serialization failure (`result_not_recorded`,
 * retried while attempts remain). Either way the job ends or waits instead
 * of staying running. The message names the SQLSTATE only: the server's
 * text may quote the data, and clients read it.
 */
export function resultNotRecordedError(error: unknown): PermanentJobError | RetryableJobError {
  const unstorable = unstorableDataError(error);
  if (unstorable) return unstorable;
  const state = sqlState(error);
  return new RetryableJobError(
    'result_not_recorded',
    `The database refused to record this job's result${state ? ` (SQLSTATE ${state})` : ''}.`,
  );
}
