// The shape of every platform task: its input checked with zod, and a
// handler that gets a TaskContext. The engine around it (workers/tickets.ts
// finds the job a wake-up stands for, workers/attempt.ts runs one attempt)
// moves the platform job through its states and turns failures into codes
// a client can show. A handler must be idempotent against retries (key its
// writes by ctx.jobId).
import type { JobHelpers, Task } from 'graphile-worker';
import type pg from 'pg';
import type { Logger } from 'pino';
import type { z } from 'zod';
import type { Config } from '../core/config.ts';
import type { CommonQueryMethods, DatabasePool } from '../core/db/pool.ts';
import type { JobCompletions } from '../core/jobs/completions.ts';
import type { DeltaPublisher } from '../core/jobs/deltas.ts';
import type { AttemptOutcome } from '../core/metrics.ts';
import type { CancelListener } from './cancellation.ts';

export type TaskDeps = {
  db: DatabasePool;
  config: Config;
  logger: Logger;
  cancels: CancelListener;
  /** Reads, claims and results of this process's jobs, in batches. */
  completions: JobCompletions;
  /** Sends stream deltas to websocket subscribers (core/jobs/deltas.ts). */
  deltas: DeltaPublisher;
  /** Counts a wake-up dropped without a platform job (platform_jobs_refused_total). */
  refused: (kind: string, reason: 'no_platform_job') => void;
  /** Records an attempt's duration and outcome (platform_job_duration_seconds). */
  observe: (kind: string, outcome: AttemptOutcome, seconds: number) => void;
  /** The pool Graphile Worker's short lane runs on, for its WorkerUtils (maintenance). */
  graphilePool: pg.Pool;
};

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
   * Ends the attempt as a wait inside the handler's own transaction (as
   * JobWait does after it), so the wait commits with what the handler read
   * under its locks: the job runs again after `delayMs` as the same attempt,
   * `progress` kept for it; `leaveQueue` lets its serial queue go on
   * meanwhile. What the handler returns is then not recorded. Throws
   * JobNotRecordedError when the job is no longer this attempt's.
   */
  waitWithin: (
    tx: CommonQueryMethods,
    wait: { delayMs: number; reason: string; progress?: unknown; leaveQueue?: boolean },
  ) => Promise<void>;
  /**
   * Aborted when the job is cancelled or the worker shuts down; long work
   * should stop. A handler that ignores a cancel is cut off after
   * JOB_CANCEL_GRACE_MS (its later writes are refused by the job's state).
   */
  signal: AbortSignal;
  helpers: JobHelpers;
};

/** A platform task: the kind of its jobs, its input, its handler. */
export type PlatformTask = {
  kind: string;
  input: z.ZodType;
  run: (input: unknown, ctx: TaskContext) => Promise<unknown>;
};

/**
 * What the worker runs under one Graphile task identifier: a platform task
 * (its wake-ups go through workers/tickets.ts), or a scheduled task of the
 * platform itself that builds its own Graphile task (define-scheduled-task.ts).
 */
export type TaskDefinition =
  | { kind: string; platform: PlatformTask }
  | { kind: string; build: (deps: TaskDeps) => Task };

/** The job's final state was set elsewhere (cancel, another attempt); the handler's transaction must not commit. */
export class JobNotRecordedError extends Error {
  override name = 'JobNotRecordedError';
}

export function defineTask<S extends z.ZodType>(
  kind: string,
  input: S,
  run: (input: z.output<S>, ctx: TaskContext) => Promise<unknown>,
): TaskDefinition {
  return { kind, platform: { kind, input, run: run as PlatformTask['run'] } };
}
