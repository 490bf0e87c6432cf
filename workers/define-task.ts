// The shape of every task: payload checked with zod on the first line, the
// platform job moved through its states around the handler, and failures
// turned into codes a client can show. A handler must be idempotent against
// retries (key its writes by ctx.jobId).
import type { JobHelpers, Task } from 'graphile-worker';
import type { Logger } from 'pino';
import { z } from 'zod';
import type { Config } from '../core/config.ts';
import type { CommonQueryMethods } from '../core/db/pool.ts';
import type { DatabasePool } from '../core/db/pool.ts';
import { TaskEnvelope } from '../core/jobs/enqueue.ts';
import { PermanentJobError, RetryableJobError } from '../core/jobs/errors.ts';
import { completeJob, failAttempt, reportProgress, startAttempt } from '../core/jobs/lifecycle.ts';

export type TaskDeps = { db: DatabasePool; config: Config; logger: Logger };

export type TaskContext = TaskDeps & {
  jobId: string;
  tenantId: string;
  attempt: number;
  maxAttempts: number;
  /** Publishes progress to pollers and websocket subscribers. */
  progress: (value: unknown) => Promise<void>;
  /**
   * Records the result inside the handler's own transaction, so the job's
   * final state commits with the task's writes (one commit fewer, and no gap
   * between them). The value returned by the handler is then not recorded again.
   */
  completeWithin: (tx: CommonQueryMethods, result: unknown) => Promise<boolean>;
  /** Aborted when the worker shuts down; long work should stop and let a retry resume. */
  signal: AbortSignal;
  helpers: JobHelpers;
};

export type TaskDefinition = { kind: string; build: (deps: TaskDeps) => Task };

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
        deps.logger.error({ kind, graphileJobId: helpers.job.id }, 'task payload is not a job envelope; dropping it');
        return;
      }
      const { jobId, tenantId } = envelope.data;
      const attempt = helpers.job.attempts;
      const maxAttempts = helpers.job.max_attempts;
      const logger = deps.logger.child({ kind, jobId, attempt });

      const started = await startAttempt(deps.db, jobId, attempt, helpers.job.locked_by);
      if (!started) {
        logger.info('job is already final (finished, cancelled or deleted); skipping');
        return;
      }
      const parsed = input.safeParse(envelope.data.input);
      if (!parsed.success) {
        await failAttempt(deps.db, jobId, { code: 'invalid_input', message: z.prettifyError(parsed.error) }, true);
        return;
      }
      let completedWithin = false;
      const ctx: TaskContext = {
        ...deps,
        logger,
        jobId,
        tenantId,
        attempt,
        maxAttempts,
        helpers,
        signal: helpers.abortSignal ?? new AbortController().signal,
        progress: async (value) => {
          await reportProgress(deps.db, jobId, value);
        },
        completeWithin: async (tx, result) => {
          completedWithin = true;
          return completeJob(tx, jobId, result);
        },
      };
      try {
        const result = await run(parsed.data, ctx);
        const recorded = completedWithin || (await completeJob(deps.db, jobId, result));
        logger.info({ recorded }, recorded ? 'job succeeded' : 'job finished by another attempt; result not recorded twice');
      } catch (error) {
        const permanent = error instanceof PermanentJobError;
        const final = permanent || attempt >= maxAttempts;
        const code = error instanceof PermanentJobError || error instanceof RetryableJobError ? error.code : 'task_failed';
        const message = permanent || error instanceof RetryableJobError ? (error as Error).message : 'The task failed unexpectedly.';
        await failAttempt(deps.db, jobId, { code, message }, final);
        logger[final ? 'error' : 'warn']({ err: error, final }, final ? 'job failed' : 'job attempt failed; it will be retried');
        // Rethrow only to have Graphile Worker retry; a final failure is recorded
        // in our jobs table and the Graphile job is let go.
        if (!final) throw error;
      }
    },
  };
}
