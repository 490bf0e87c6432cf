// The one way to create a job (docs/engine.md). Every job the platform
// creates, a tenant's or the platform's own, is written by one call of the
// database function platform_enqueue (migration 0043): the platform `jobs`
// rows that clients poll, their Graphile Worker wake-ups, their accounts'
// counts and the quota check, all in the caller's transaction, so they
// commit together or not at all. chat_send_round writes its turns with the
// same functions.
import { timeOrderedId } from '../ids.ts';
import { z } from 'zod';
import { sql, type CommonQueryMethods } from '../db/pool.ts';
import { poolOf } from './pools.ts';
import { asQueueLimitError } from './quota.ts';

export type JobSpec = {
  /** Task identifier, e.g. 'chat.turn'; a file of the same name lives in workers/tasks/. */
  kind: string;
  tenantId: string;
  /** Task input, kept small: large data belongs in its own table. */
  input?: Record<string, unknown>;
  /**
   * Jobs that share a queue name run one at a time, in the order they were
   * enqueued, each only after the one before it ended (one chat session,
   * one channel). Keep the kinds of one queue in one pool.
   */
  queueName?: string;
  /** Not before this time, outside the fair order (a delayed step). */
  runAt?: Date;
  maxAttempts?: number;
  /** Pre-assigned id, for callers that must know it before enqueueing. */
  id?: string;
  /** The chat session the job works for (a turn, a delivery of its answer): listed in the session's activity. */
  sessionId?: string;
  /**
   * Work a person or an agent asked for, which counts against the account's
   * limit of unfinished jobs (plan_limits.max_open_jobs): over it, the
   * enqueue throws QueueLimitError and the transaction writes nothing.
   * Follow-up work of the platform (a reply's delivery, a webhook) is never refused.
   */
  quota?: boolean;
  /**
   * Queues the failed job `id` again instead of a new one (the console's
   * retry): its attempts go on from `afterAttempts`, and it runs after the
   * jobs already in its queue.
   */
  again?: { afterAttempts: number };
};

/**
 * A job of the platform itself, with no tenant and no platform job row
 * (maintenance, a partner token revocation): only its Graphile job. A `key`
 * makes it replace (or, with preserveRunAt, keep the time of) a pending job
 * of the same key.
 */
export type SystemJobSpec = {
  system: true;
  kind: string;
  payload?: Record<string, unknown>;
  key?: string;
  runAt?: Date;
  maxAttempts?: number;
  preserveRunAt?: boolean;
};

/**
 * What Graphile Worker hands to a task for a platform job: the job's id;
 * `base` is the attempts it had made before this wake-up (after a wait, or
 * a retry from the console). The input and the workspace are read from the
 * job's row, which holds them once (older wake-ups carry copies too).
 */
export const TaskEnvelope = z.object({
  jobId: z.uuid(),
  base: z.int().min(0).default(0),
});
export type TaskEnvelope = z.infer<typeof TaskEnvelope>;

/** What Graphile Worker hands to a task for a serial queue: run its next job. */
export const QueueEnvelope = z.object({ queue: z.string().min(1), tenantId: z.uuid() });
export type QueueEnvelope = z.infer<typeof QueueEnvelope>;

export type EnqueuedJob = { id: string; kind: string; status: 'queued' };

export const DEFAULT_MAX_ATTEMPTS = 10;

/**
 * The Graphile Worker flag of a wake-up whose run_at is a fair start tag (a
 * worker that starts it moves its pool's service position, workers/fair-clock.ts).
 */
export const FAIR_FLAG = 'fair';

/** A platform job as platform_enqueue and platform_write_jobs read it. */
export function jobRecord(spec: JobSpec) {
  return {
    id: spec.id ?? timeOrderedId(),
    tenant_id: spec.tenantId,
    kind: spec.kind,
    pool: poolOf(spec.kind),
    queue: spec.queueName ?? null,
    input: spec.input ?? {},
    run_at: spec.runAt?.toISOString() ?? null,
    max_attempts: spec.maxAttempts ?? DEFAULT_MAX_ATTEMPTS,
    session_id: spec.sessionId ?? null,
    quota: spec.quota ?? false,
    retry: spec.again !== undefined,
    base: spec.again?.afterAttempts ?? 0,
  };
}

function systemRecord(spec: SystemJobSpec) {
  return {
    system: true,
    kind: spec.kind,
    payload: spec.payload ?? {},
    key: spec.key ?? null,
    run_at: spec.runAt?.toISOString() ?? null,
    max_attempts: spec.maxAttempts ?? null,
    preserve_run_at: spec.preserveRunAt ?? false,
  };
}

const isSystem = (spec: JobSpec | SystemJobSpec): spec is SystemJobSpec => 'system' in spec && spec.system;

/**
 * Writes these jobs in one statement, inside the transaction (or on the
 * connection) it is given. Platform jobs get their ids here when they have
 * none; the answer lists them in order (system jobs are left out).
 */
export async function enqueueJobs(
  db: CommonQueryMethods,
  specs: ReadonlyArray<JobSpec | SystemJobSpec>,
): Promise<EnqueuedJob[]> {
  if (specs.length === 0) return [];
  const records = specs.map((spec) => (isSystem(spec) ? systemRecord(spec) : jobRecord(spec)));
  await db.query(sql.unsafe`select platform_enqueue(${sql.jsonb(records as never)})`).catch((error: unknown) => {
    throw asQueueLimitError(error) ?? error;
  });
  return records.flatMap((r) => ('id' in r ? [{ id: r.id, kind: r.kind, status: 'queued' as const }] : []));
}

export async function enqueueJob(db: CommonQueryMethods, spec: JobSpec): Promise<EnqueuedJob> {
  const [job] = await enqueueJobs(db, [spec]);
  return job!;
}

/** Puts a platform-level job in the queue (see SystemJobSpec). */
export async function enqueueSystemJob(db: CommonQueryMethods, spec: Omit<SystemJobSpec, 'system'>): Promise<void> {
  await enqueueJobs(db, [{ system: true, ...spec }]);
}
