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

/** A transient failure with a stable code (provider 429/5xx, timeouts). */
export class RetryableJobError extends Error {
  override name = 'RetryableJobError';
  constructor(
    public readonly code: string,
    message: string,
  ) {
    super(message);
  }
}
