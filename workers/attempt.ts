// One attempt of a platform job, from its start to the one write that ends
// it: a result, a final failure, or a wait. A wait (JobWait, or a failure
// that will be retried) ends the attempt at once and the job is woken again
// at its time (core/jobs/lifecycle.ts waitJob), so waiting never holds a
// slot. 'running' is written only for work that lasts
// (WORKER_RUNNING_AFTER_MS) or reports progress. Every write is fenced by
// the attempt number, so an attempt given up on never records over the one
// that replaced it.
import type { JobHelpers } from 'graphile-worker';
import type { Logger } from 'pino';
import { z } from 'zod';
import { isDatabaseUnavailable, retryWhileUnavailable } from '../core/db/unavailable.ts';
import {
  backoffMs,
  JobWait,
  PermanentJobError,
  RetryableJobError,
  resultNotRecordedError,
  unstorableDataError,
} from '../core/jobs/errors.ts';
import {
  completeJob,
  failJob,
  finishCancelled,
  handBackJob,
  markRunning,
  waitJob,
  type Holder,
} from '../core/jobs/lifecycle.ts';
import { lazyChild } from '../core/logger.ts';
import type { AttemptOutcome } from '../core/metrics.ts';
import { JobNotRecordedError, type PlatformTask, type TaskContext, type TaskDeps } from './define-task.ts';

/**
 * The job an attempt runs, as its wake-up or its queue's claim found it;
 * `running`: the claim marked it running already (a serial job).
 */
export type AttemptJob = {
  jobId: string;
  tenantId: string;
  kind: string;
  input: unknown;
  attempt: number;
  maxAttempts: number;
  running?: boolean;
};

/** A Retry-After is honoured up to a day (a reply that late is still sent, not lost). */
const MAX_RETRY_AFTER_MS = 86_400_000;

const CUT = Symbol('cut');

/**
 * The handler's outcome, or CUT when the job was cancelled and the handler
 * did not stop within the grace time. A cut handler runs on unobserved; what
 * it writes later is refused by the job's state.
 */
function untilCancelled<T>(
  work: Promise<T>,
  cancel: AbortSignal,
  graceMs: number,
  logger: Logger,
): Promise<T | typeof CUT> {
  const cut = new Promise<typeof CUT>((resolve) => {
    const arm = () => setTimeout(resolve, graceMs, CUT).unref();
    if (cancel.aborted) arm();
    else cancel.addEventListener('abort', arm, { once: true });
  });
  return Promise.race([work, cut]).then((outcome) => {
    if (outcome === CUT) {
      logger.warn({ graceMs }, 'cancelled job did not stop within the grace time; cut off');
      work.catch(() => undefined); // it may still fail later: nobody is waiting
    }
    return outcome;
  });
}

/** The attempt's own bookkeeping: PostgreSQL away is waited out, the job staying this attempt's meanwhile. */
export function durableFor(logger: Logger, signal: AbortSignal | undefined) {
  return <T>(write: () => Promise<T>) =>
    retryWhileUnavailable(write, {
      signal,
      onWait: (e) =>
        logger.warn(
          { reason: (e as Error).message },
          'database unreachable while starting or ending the attempt; waiting for it',
        ),
    });
}

export async function runAttempt(
  task: PlatformTask,
  job: AttemptJob,
  deps: TaskDeps,
  helpers: JobHelpers,
): Promise<void> {
  const started = performance.now();
  const logger = lazyChild(deps.logger, { kind: job.kind, jobId: job.jobId, attempt: job.attempt });
  try {
    const outcome = await attempt(task, job, deps, helpers, logger).catch((error) =>
      handBack(error, job, deps, helpers, logger),
    );
    deps.observe(job.kind, outcome, (performance.now() - started) / 1000);
  } finally {
    deps.deltas.ended(job.jobId); // its text so far is in its row now; no replay needs it
  }
}

const holderOf = (helpers: JobHelpers): Holder => ({
  lockedBy: helpers.job.locked_by,
  lockedAt: helpers.job.locked_at ? new Date(helpers.job.locked_at) : null,
});

/** What a job's last attempt records when how it ended could not be: nothing of the task's. */
const LAST_NOT_RECORDED = { code: 'result_not_recorded', message: 'How the last attempt ended could not be recorded.' };

/**
 * A write that ends the attempt failed, not for an outage: the job is
 * queued again with a wake-up (handBackJob), or at its last attempt fails
 * with a constant failure, so it never stays running, and its serial queue
 * blocked, while this worker lives. Handed on when that fails too, or in an
 * outage (a stopping worker gives its jobs back).
 */
async function handBack(
  error: unknown,
  job: AttemptJob,
  deps: TaskDeps,
  helpers: JobHelpers,
  logger: Logger,
): Promise<AttemptOutcome> {
  if (isDatabaseUnavailable(error)) throw error;
  const last = job.attempt >= job.maxAttempts;
  logger.error(
    { err: error },
    last
      ? 'could not record how the last attempt ended; the job fails'
      : 'could not record how the attempt ended; the job is queued again',
  );
  const holder = holderOf(helpers);
  const until = new Date(Date.now() + backoffMs(job.attempt));
  const write = last
    ? () => failJob(deps.db, job.jobId, job.attempt, LAST_NOT_RECORDED, holder)
    : () => handBackJob(deps.db, { jobId: job.jobId, attempt: job.attempt, until, holder });
  try {
    return (await durableFor(logger, helpers.abortSignal)(write)) ? 'failed' : 'lost';
  } catch (refused) {
    logger.error({ err: refused }, 'could not record that either');
    throw refused;
  }
}

async function attempt(
  task: PlatformTask,
  job: AttemptJob,
  deps: TaskDeps,
  helpers: JobHelpers,
  logger: Logger,
): Promise<AttemptOutcome> {
  const { jobId, attempt: n } = job;
  const durable = durableFor(logger, helpers.abortSignal);
  const holder = holderOf(helpers);
  const parsed = task.input.safeParse(job.input);
  if (!parsed.success) {
    await durable(() =>
      failJob(deps.db, jobId, n, { code: 'invalid_input', message: z.prettifyError(parsed.error) }, holder),
    );
    logger.error('job failed: its input does not match its kind');
    return 'failed';
  }
  const cancel = deps.cancels.track(jobId);
  if (cancel.signal.aborted) {
    // Cancelled between its wake-up and here: the handler never starts.
    cancel.untrack();
    await durable(() => finishCancelled(deps.db, jobId));
    logger.info('job cancelled before it started; no result recorded');
    return 'cancelled';
  }
  const { ctx, settleRunning, endedWithin } = attemptContext(job, deps, helpers, logger, holder, cancel.signal);
  /** The job was ended elsewhere: by a cancel (recorded here), or by another attempt. */
  const endedElsewhere = async (what: string): Promise<AttemptOutcome> => {
    if (await durable(() => finishCancelled(deps.db, jobId))) {
      logger.info(`job cancelled as it ${what}; no result recorded`);
      return 'cancelled';
    }
    logger.info(`job finished by another attempt as this one ${what}; nothing recorded twice`);
    return 'lost';
  };
  try {
    const result = await untilCancelled(
      task.run(parsed.data, ctx),
      cancel.signal,
      deps.config.worker.cancelGraceMs,
      logger,
    );
    if (cancel.signal.aborted && !endedWithin()) {
      await durable(() => finishCancelled(deps.db, jobId));
      logger.info('job cancelled; no result recorded');
      return 'cancelled';
    }
    await settleRunning();
    const ended = endedWithin();
    if (ended) {
      if (ended === 'succeeded') logger.info('job succeeded');
      return ended;
    }
    // The slot does not wait for the result's write: it goes in the next
    // batch of results (core/jobs/completions.ts), and a stopping worker drains them.
    // A stopping worker drains this whole chain, the check of a result
    // written elsewhere included, before it closes its pool.
    deps.completions.track(
      durable(() => deps.completions.complete({ jobId, attempt: n, result, holder }))
        .then(
          async (recorded) => (recorded ? logger.info('job succeeded') : await endedElsewhere('finished')),
          (error) => resultNotWritten(error, job, deps, helpers, durable, logger),
        )
        .catch((error) =>
          isDatabaseUnavailable(error)
            ? logger.warn(
                { reason: (error as Error).message },
                'database unreachable: whether a cancel ended this job is settled by the dead-worker sweep',
              )
            : logger.error({ err: error }, 'could not record how this job ended'),
        ),
    );
    return 'succeeded';
  } catch (error) {
    await settleRunning();
    if (cancel.signal.aborted) {
      await durable(() => finishCancelled(deps.db, jobId));
      logger.info('job cancelled; no result recorded');
      return 'cancelled';
    }
    if (error instanceof JobNotRecordedError) return await endedElsewhere('finished');
    if (error instanceof JobWait) {
      // Not a failure: the same attempt goes on later, its slot free meanwhile.
      const until = new Date(Date.now() + Math.max(0, error.delayMs));
      const waited = await durable(() =>
        waitJob(deps.db, {
          jobId,
          attempt: n,
          keepAttempt: true,
          until,
          progress: error.progress,
          holder,
          leaveQueue: error.leaveQueue,
        }),
      );
      if (!waited) return await endedElsewhere('began to wait');
      logger.debug({ delayMs: error.delayMs, reason: error.reason }, 'job waits; its slot is free meanwhile');
      return 'waited';
    }
    return await recordFailure(error, job, deps, holder, durable, logger);
  } finally {
    await settleRunning();
    cancel.untrack();
  }
}

/**
 * The result's write failed, not for an outage (that is waited out, but for
 * a stopping worker, which gives its jobs back): the database refused it.
 * The job fails, or is retried while attempts remain (unstorable data
 * fails at once), and is handed back if even that cannot be written.
 */
async function resultNotWritten(
  error: unknown,
  job: AttemptJob,
  deps: TaskDeps,
  helpers: JobHelpers,
  durable: ReturnType<typeof durableFor>,
  logger: Logger,
): Promise<void> {
  if (isDatabaseUnavailable(error)) {
    logger.warn(
      { reason: (error as Error).message },
      "database unreachable as the worker stops; the job's result is not recorded",
    );
    return;
  }
  logger.error({ err: error }, 'the database refused the result of this job');
  try {
    await recordFailure(resultNotRecordedError(error), job, deps, holderOf(helpers), durable, logger);
  } catch (failed) {
    await handBack(failed, job, deps, helpers, logger);
  }
}

/**
 * The TaskContext of one attempt, with the 'running' mark written only for
 * work that lasts (a first progress writes it too) and the end a handler
 * may write in its own transaction (completeWithin, waitWithin).
 */
function attemptContext(
  job: AttemptJob,
  deps: TaskDeps,
  helpers: JobHelpers,
  logger: Logger,
  holder: Holder,
  cancel: AbortSignal,
) {
  const { jobId, attempt: n } = job;
  let markedRunning: Promise<unknown> | null = null;
  const runningTimer = setTimeout(() => {
    if (job.running) return;
    markedRunning ??= markRunning(deps.db, jobId, n, holder).catch((error) =>
      logger.warn({ err: error }, 'could not mark the job running'),
    );
  }, deps.config.worker.runningAfterMs);
  /** Before progress or the final write: no 'running' may land after it. */
  const settleRunning = async () => {
    clearTimeout(runningTimer);
    await markedRunning;
  };
  let endedWithin: 'succeeded' | 'waited' | null = null;
  const ctx: TaskContext = {
    ...deps,
    logger,
    jobId,
    tenantId: job.tenantId,
    attempt: n,
    maxAttempts: job.maxAttempts,
    helpers,
    signal: helpers.abortSignal ? AbortSignal.any([helpers.abortSignal, cancel]) : cancel,
    progress: async (value) => {
      await settleRunning();
      await deps.completions.progress(jobId, n, value, holder);
    },
    delta: (offset, text) => deps.deltas.publish({ jobId, attempt: n, offset, text }),
    flushDeltas: () => deps.deltas.flush(),
    completeWithin: async (tx, result) => {
      await settleRunning();
      if (!(await completeJob(tx, jobId, n, result, holder)))
        throw new JobNotRecordedError("The job is no longer this attempt's to finish.");
      endedWithin = 'succeeded';
    },
    waitWithin: async (tx, wait) => {
      await settleRunning();
      const until = new Date(Date.now() + Math.max(0, wait.delayMs));
      if (
        !(await waitJob(tx, {
          jobId,
          attempt: n,
          keepAttempt: true,
          until,
          progress: wait.progress,
          holder,
          leaveQueue: wait.leaveQueue,
        }))
      ) {
        throw new JobNotRecordedError("The job is no longer this attempt's to end.");
      }
      logger.debug({ delayMs: wait.delayMs, reason: wait.reason }, 'job waits; its slot is free meanwhile');
      endedWithin = 'waited';
    },
  };
  return { ctx, settleRunning, endedWithin: () => endedWithin };
}

/** A failed attempt: final (its code recorded), or retried after a backoff or the other side's Retry-After. */
async function recordFailure(
  thrown: unknown,
  job: AttemptJob,
  deps: TaskDeps,
  holder: Holder,
  durable: ReturnType<typeof durableFor>,
  logger: Logger,
): Promise<AttemptOutcome> {
  // Data PostgreSQL refuses fails again at every retry: permanent, its error logged whole.
  const unstorable = unstorableDataError(thrown);
  if (unstorable) logger.error({ err: thrown }, 'the database refused the data of this job');
  const error = unstorable ?? thrown;
  const permanent = error instanceof PermanentJobError;
  const final = permanent || job.attempt >= job.maxAttempts;
  const code = error instanceof PermanentJobError || error instanceof RetryableJobError ? error.code : 'task_failed';
  const message =
    permanent || error instanceof RetryableJobError ? (error as Error).message : 'The task failed unexpectedly.';
  const retryAfterMs = error instanceof RetryableJobError ? error.retryAfterMs : undefined;
  const delayMs = retryAfterMs === undefined ? backoffMs(job.attempt) : Math.min(retryAfterMs, MAX_RETRY_AFTER_MS);
  const written = final
    ? await durable(() => failJob(deps.db, job.jobId, job.attempt, { code, message }, holder))
    : await durable(() => {
        const until = new Date(Date.now() + delayMs);
        return waitJob(deps.db, {
          jobId: job.jobId,
          attempt: job.attempt,
          keepAttempt: false,
          until,
          holder,
          error: { code, message, retrying: true, retryAt: until.toISOString() },
        });
      });
  if (!written) {
    if (await durable(() => finishCancelled(deps.db, job.jobId))) {
      logger.info('job cancelled as its attempt failed; no result recorded');
      return 'cancelled';
    }
    logger.info({ code }, 'job attempt failed after another attempt ended the job; nothing recorded');
    return 'lost';
  }
  // One line: an expected failure (a RetryableJobError names its cause) needs no stack.
  const expected = error instanceof PermanentJobError || error instanceof RetryableJobError;
  const detail = error instanceof RetryableJobError && error.detail ? { detail: error.detail } : {};
  logger[final ? 'error' : 'warn'](
    { ...(expected ? { code, reason: message, ...detail } : { err: error }), final },
    final ? 'job failed' : `job attempt failed; retry in ${Math.round(delayMs / 100) / 10} s`,
  );
  return 'failed';
}
