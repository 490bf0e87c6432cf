// The shape of every task: payload checked with zod on the first line, the
// platform job moved through its states around the handler, and failures
// turned into codes a client can show. A first attempt costs one write, its
// result (a retry reads the job first; a job of a named queue first checks
// that no earlier job of its queue is still to run), batched with other jobs' results
// (core/jobs/completions.ts); 'running' is written only for work that lasts
// (WORKER_RUNNING_AFTER_MS) or reports progress (core/jobs/lifecycle.ts).
// A handler must be idempotent against retries (key its writes by ctx.jobId).
import type { JobHelpers, Task } from 'graphile-worker';
import type { Logger } from 'pino';
import { z } from 'zod';
import type { Config } from '../core/config.ts';
import type { CommonQueryMethods } from '../core/db/pool.ts';
import { retryWhileUnavailable } from '../core/db/unavailable.ts';
import type { DatabasePool } from '../core/db/pool.ts';
import { TaskEnvelope } from '../core/jobs/enqueue.ts';
import { JobWait, PermanentJobError, RetryableJobError } from '../core/jobs/errors.ts';
import type { JobCompletions } from '../core/jobs/completions.ts';
import type { DeltaPublisher } from '../core/jobs/deltas.ts';
import { completeJob, failAttempt, finishCancelled, markRunning, waitAttempt, type Holder } from '../core/jobs/lifecycle.ts';
import { backoffMs, JobLost, JobParked, parkJob } from '../core/jobs/park.ts';
import { takeQueueTurn } from '../core/jobs/queue-order.ts';
import type { CancelListener } from './cancellation.ts';

export type TaskDeps = {
  db: DatabasePool;
  config: Config;
  logger: Logger;
  cancels: CancelListener;
  /** Writes the results of this process's jobs in batches. */
  completions: JobCompletions;
  /** Counts a job refused without running it (platform_jobs_refused_total). */
  refused: (kind: string, reason: 'no_platform_job') => void;
  /** Told when a job of this process was parked until then (the waker sets its timer). */
  parked: (until: Date) => void;
  /** Sends stream deltas to websocket subscribers (core/jobs/deltas.ts). */
  deltas: DeltaPublisher;
  /** While the later jobs of this queue that came in this job's batch are being given back (serial-batches.ts). */
  siblingsReturned: (queueId: string) => Promise<void> | undefined;
  /** Every kind this worker process runs (a queue's earlier job of another kind is not waited for). */
  kinds: readonly string[];
};

/** A Retry-After is honoured up to a day (a reply that late is still sent, not lost). */
const MAX_RETRY_AFTER_MS = 86_400_000;
/** A wait is at least this long, so Graphile's own release of the attempt comes first. */
const MIN_PARK_MS = 100;

export type TaskContext = TaskDeps & {
  jobId: string;
  tenantId: string;
  attempt: number;
  maxAttempts: number;
  /** Publishes progress to pollers and websocket subscribers (a row write: now and then, not per token). */
  progress: (value: unknown) => Promise<void>;
  /** Streams a piece of the answer, at `offset` in it, to websocket subscribers (no row write). */
  delta: (offset: number, text: string) => void;
  /** Sends the deltas gathered so far; call it before the final write, so none follows the final state. */
  flushDeltas: () => Promise<void>;
  /**
   * Records the result inside the handler's own transaction, so the job's
   * final state commits with the task's writes (one commit fewer, and no gap
   * between them). The value returned by the handler is then not recorded again.
   * Throws JobNotRecordedError (rolling the transaction back) when the job is
   * no longer this attempt's to finish: cancelled, or finished by another attempt.
   * It first waits for a 'running' mark under way: call it before the
   * transaction locks a row that a trigger on the job's status updates (a
   * company run's), or the two wait on each other.
   */
  completeWithin: (tx: CommonQueryMethods, result: unknown) => Promise<void>;
  /**
   * Aborted when the job is cancelled or the worker shuts down; long work
   * should stop. A handler that ignores a cancel is cut off after
   * JOB_CANCEL_GRACE_MS (its later writes are refused by the job's state).
   */
  signal: AbortSignal;
  helpers: JobHelpers;
};

export type TaskDefinition = { kind: string; build: (deps: TaskDeps) => Task };

/** The job's final state was set elsewhere (cancel, another attempt); the handler's transaction must not commit. */
export class JobNotRecordedError extends Error {
  override name = 'JobNotRecordedError';
}

const CUT = Symbol('cut');

/**
 * The handler's outcome, or CUT when the job was cancelled and the handler
 * did not stop within the grace time. A cut handler runs on unobserved; what
 * it writes later is refused by the job's state.
 */
function untilCancelled<T>(work: Promise<T>, cancel: AbortSignal, graceMs: number, logger: Logger): Promise<T | typeof CUT> {
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

export function defineTask<S extends z.ZodType>(
  kind: string,
  input: S,
  run: (input: z.output<S>, ctx: TaskContext) => Promise<unknown>,
): TaskDefinition {
  return {
    kind,
    build: (deps) => async (payload, helpers) => {
      const envelope = TaskEnvelope.safeParse(payload);
      if (!envelope.success) {
        // Nothing to report to: without a job id there is no platform job.
        deps.logger.error(
          { kind, graphileJobId: helpers.job.id },
          'refused a job without a platform job row (added with graphile_worker.add_job directly?): enqueue with enqueueJob() from core/jobs/enqueue.ts so clients can follow it; dropping it',
        );
        deps.refused(kind, 'no_platform_job');
        return;
      }
      const { jobId, tenantId } = envelope.data;
      const attempt = helpers.job.attempts;
      const maxAttempts = helpers.job.max_attempts;
      const logger = deps.logger.child({ kind, jobId, attempt });

      // The attempt's own bookkeeping (its first read, its end): PostgreSQL
      // away is waited out, the job staying this process's meanwhile, never
      // handed on to Graphile, whose failure path would let the job's queue
      // go and a session's next turn overtake this one.
      const durable = <T>(write: () => Promise<T>) => retryWhileUnavailable(write, {
        signal: helpers.abortSignal,
        onWait: (e) => logger.warn({ reason: (e as Error).message }, 'database unreachable while starting or ending the attempt; waiting for it'),
      });
      const holder: Holder = { lockedBy: helpers.job.locked_by, lockedAt: helpers.job.locked_at ? new Date(helpers.job.locked_at) : null };

      // A job of a named queue runs only when no earlier job of its queue is
      // still to run (core/jobs/queue-order.ts); otherwise it waits behind it.
      // First the later jobs of its batch go back, so none is held here once it ends.
      if (helpers.job.job_queue_id != null && holder.lockedBy) {
        await deps.siblingsReturned(String(helpers.job.job_queue_id));
        const lockedBy = holder.lockedBy;
        const turn = await durable(() => takeQueueTurn(deps.db, { graphileJobId: String(helpers.job.id), queueId: helpers.job.job_queue_id!, lockedBy }, deps.kinds));
        if (turn.ahead !== null) {
          if (!turn.until) {
            logger.info('job was let go before it started; its next attempt decides');
            throw new JobLost();
          }
          logger.info({ ahead: turn.ahead, until: turn.until }, 'an earlier job of its queue is still to run; this one waits behind it');
          deps.parked(turn.until);
          throw new JobParked(turn.until, `waits for job ${turn.ahead} of its queue`);
        }
      }

      // A first attempt runs without reading the job: before its first pick a
      // job can only have been cancelled or deleted, and either takes the
      // Graphile job out of the queue (0028) or, when it is picked already,
      // reaches this process as a cancel. Retries read, as a lost attempt may
      // have left the job final or asked to stop; so does an attempt that
      // waited parked (its last_error says why it waited).
      if ((attempt > 1 || helpers.job.last_error) && !(await durable(() => deps.completions.open(jobId)))) {
        logger.info('job is already final (finished, cancelled or deleted); skipping');
        return;
      }
      const parsed = input.safeParse(envelope.data.input);
      if (!parsed.success) {
        await failAttempt(deps.db, jobId, attempt, { code: 'invalid_input', message: z.prettifyError(parsed.error) }, true, holder);
        return;
      }
      let completedWithin = false;
      const cancel = deps.cancels.track(jobId);
      if (cancel.signal.aborted) {
        // Cancelled between its pick and here: the handler never starts.
        cancel.untrack();
        await finishCancelled(deps.db, jobId);
        return logger.info('job cancelled before it started; no result recorded');
      }
      // 'running' only for work that lasts; a first progress writes it too.
      let markedRunning: Promise<unknown> | null = null;
      const runningTimer = setTimeout(() => {
        markedRunning ??= markRunning(deps.db, jobId, attempt, holder).catch((error) => logger.warn({ err: error }, 'could not mark the job running'));
      }, deps.config.worker.runningAfterMs);
      /** Before progress or the final write: no 'running' may land after it. */
      const settleRunning = async () => {
        clearTimeout(runningTimer);
        await markedRunning;
      };
      const ctx: TaskContext = {
        ...deps,
        logger,
        jobId,
        tenantId,
        attempt,
        maxAttempts,
        helpers,
        signal: helpers.abortSignal ? AbortSignal.any([helpers.abortSignal, cancel.signal]) : cancel.signal,
        progress: async (value) => {
          await settleRunning();
          await deps.completions.progress(jobId, attempt, value, holder);
        },
        delta: (offset, text) => deps.deltas.publish({ jobId, attempt, offset, text }),
        flushDeltas: () => deps.deltas.flush(),
        completeWithin: async (tx, result) => {
          await settleRunning();
          if (!(await completeJob(tx, jobId, attempt, result, holder))) throw new JobNotRecordedError('The job is no longer this attempt\'s to finish.');
          completedWithin = true;
        },
      };
      const endCancelled = async () => {
        await finishCancelled(deps.db, jobId);
        logger.info('job cancelled; no result recorded');
      };
      try {
        const result = await untilCancelled(run(parsed.data, ctx), cancel.signal, deps.config.worker.cancelGraceMs, logger);
        if (cancel.signal.aborted && !completedWithin) return await endCancelled();
        await settleRunning();
        const recorded = completedWithin || (await deps.completions.complete({ jobId, attempt, result, holder }));
        if (!recorded && (await finishCancelled(deps.db, jobId))) return logger.info('job cancelled as it finished; no result recorded');
        if (!recorded) {
          logger.info('job finished by another attempt; result not recorded twice');
          throw new JobLost();
        }
        logger.info({ recorded }, 'job succeeded');
      } catch (error) {
        if (error instanceof JobLost) throw error;
        if (cancel.signal.aborted) return await endCancelled();
        if (error instanceof JobNotRecordedError) {
          if (await finishCancelled(deps.db, jobId)) return logger.info('job cancelled as it finished; no result recorded');
          logger.info('job finished by another attempt; this one stops');
          throw new JobLost();
        }
        // Parks the job until `delayMs` from now and hands Graphile JobParked.
        const park = async (delayMs: number, why: string, keepAttempt: boolean): Promise<never> => {
          const until = new Date(Date.now() + Math.max(MIN_PARK_MS, delayMs));
          // Without a known lock holder it cannot park: Graphile's own retry takes it.
          if (!holder.lockedBy) throw error;
          if (!(await durable(() => parkJob(deps.db, { graphileJobId: String(helpers.job.id), lockedBy: holder.lockedBy!, until, why, keepAttempt })))) {
            // No longer this process's job (a sweep or a pool restart let it
            // go while it failed): whoever holds it decides. Not an error of
            // Graphile's to log; the failure is recorded already.
            logger.info('job was let go while its attempt ended; its next attempt decides');
            throw new JobLost();
          }
          deps.parked(until);
          throw new JobParked(until, why);
        };
        if (error instanceof JobWait) {
          // Not a failure: the same attempt goes on later, its slot free meanwhile.
          await settleRunning();
          if (!(await durable(() => waitAttempt(deps.db, jobId, attempt, error.progress)))) {
            if (await finishCancelled(deps.db, jobId)) return logger.info('job cancelled as it began to wait; no result recorded');
            logger.info('job finished by another attempt; this one stops');
            throw new JobLost();
          }
          logger.debug({ delayMs: error.delayMs, reason: error.reason }, 'job waits; its slot is free meanwhile');
          return await park(error.delayMs, error.reason, true);
        }
        const permanent = error instanceof PermanentJobError;
        const final = permanent || attempt >= maxAttempts;
        const code = error instanceof PermanentJobError || error instanceof RetryableJobError ? error.code : 'task_failed';
        const message = permanent || error instanceof RetryableJobError ? (error as Error).message : 'The task failed unexpectedly.';
        const retryAfterMs = error instanceof RetryableJobError ? error.retryAfterMs : undefined;
        const delayMs = retryAfterMs === undefined ? backoffMs(attempt) : Math.min(retryAfterMs, MAX_RETRY_AFTER_MS);
        await settleRunning();
        await durable(() => failAttempt(deps.db, jobId, attempt, { code, message }, final, holder, final ? undefined : new Date(Date.now() + delayMs), envelope.data.input));
        // One line: an expected failure (a RetryableJobError names its cause) needs no stack.
        const expected = error instanceof PermanentJobError || error instanceof RetryableJobError;
        const detail = error instanceof RetryableJobError && error.detail ? { detail: error.detail } : {};
        logger[final ? 'error' : 'warn']({ ...(expected ? { code, reason: message, ...detail } : { err: error }), final },
          final ? 'job failed' : `job attempt failed; retry in ${Math.round(delayMs / 100) / 10} s`);
        // A final failure is recorded in our jobs table and the Graphile job is
        // let go; a retry waits parked, keeping its place (and its queue's lock).
        if (!final) await park(delayMs, `${code}: ${message}`, false);
      } finally {
        clearTimeout(runningTimer);
        cancel.untrack();
      }
    },
  };
}
