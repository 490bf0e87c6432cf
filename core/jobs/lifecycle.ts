// How a worker moves a platform job through its states. Every write is
// guarded by the status and by the attempt number (a fencing token, see
// mayWrite): an attempt that was given up on (its worker looked dead, or the
// database was away) and runs on somewhere can never write progress, a
// result or a failure over the attempt that replaced it, nor resurrect a
// finished job. Each statement's changes are announced by jobs_after_update
// (job id and version, migration 0054), which is how websocket subscribers
// hear about them.
//
// 'running' is written lazily: an attempt starts with one read (openAttempts,
// batched) or a queue's claim (claimQueues), and marks the job running only
// with its first progress, after WORKER_RUNNING_AFTER_MS, or not at all when
// its final write comes first. A quick job so costs one write (its result).
import { sql, type CommonQueryMethods } from '../db/pool.ts';
import { storableJson, storableText } from '../storable.ts';
import { z } from 'zod';
import { JobRow } from './schema.ts';

const jobRow = sql.type(JobRow);

export type JobFailure = { code: string; message: string };

/** Who holds the attempt (Graphile's lock), recorded with the attempt's first write. */
export type Holder = { lockedBy: string | null; lockedAt: Date | null };
const NO_HOLDER: Holder = { lockedBy: null, lockedAt: null };

/**
 * Attempt `a` may write while no later attempt wrote and the job is not final:
 * its own earlier writes left it 'running' with attempts = a; an attempt that
 * has not written yet finds 'queued' (or a lost attempt's 'running') with a
 * smaller number. Of two attempts that never wrote, the first to finish wins,
 * and the other finds the job final: still exactly one result.
 */
const mayWrite = (attempt: number) => sql.fragment`job_attempt_may_write(status, attempts, ${attempt})`;

/** What an attempt's first write records besides its own change. */
const attemptColumns = (attempt: number, holder: Holder) => sql.fragment`
  version = version + 1, updated_at = now(),
  attempts = ${attempt}, locked_by = coalesce(${holder.lockedBy}, locked_by),
  started_at = coalesce(started_at, ${holder.lockedAt ? holder.lockedAt.toISOString() : null}::timestamptz, now())`;

/**
 * The worker's two hot statements run on plain node-postgres with named
 * (prepared) statements, not through slonik: measured per statement, that
 * halves the CPU of the process and the server (see JobCompletions).
 */
export type PreparedQueryable = {
  query: (statement: {
    name: string;
    text: string;
    values: unknown[];
  }) => Promise<{ rows: Array<Record<string, unknown>> }>;
};

const OPEN_ATTEMPTS = `
  select id::text, tenant_id::text, status, case when seq is not null then queue_name end as queue_name,
    not_before > now() as later, input
  from jobs where id = any($1::uuid[])`;

/**
 * What a wake-up of a platform job finds: 'run' (it is open and due),
 * 'skip' (final, gone, or asked to stop, which ends it as cancelled here),
 * 'later' (it waits: its own wake-up comes at its time), or its serial
 * queue (a job of a queue runs when its queue's turn claims it).
 */
export type AttemptStart =
  | { state: 'run'; tenantId: string; input: unknown }
  | { state: 'skip' }
  | { state: 'later' }
  | { state: 'serial'; queue: string };

/**
 * One read for the wake-ups that start together. A job asked to stop while
 * it waited (cancelling, its last attempt gone) ends as cancelled here.
 */
export async function openAttempts(db: PreparedQueryable, jobIds: readonly string[]): Promise<AttemptStart[]> {
  const { rows } = await db.query({ name: 'platform_open_attempts', text: OPEN_ATTEMPTS, values: [jobIds] });
  const byId = new Map(rows.map((r) => [r.id as string, r]));
  const stopping = rows.filter((r) => r.status === 'cancelling').map((r) => r.id as string);
  if (stopping.length > 0)
    await db.query({ name: 'platform_end_cancelling', text: END_CANCELLING, values: [stopping] });
  return jobIds.map((id): AttemptStart => {
    const row = byId.get(id);
    if (!row || (row.status !== 'queued' && row.status !== 'running')) return { state: 'skip' };
    if (row.queue_name) return { state: 'serial', queue: row.queue_name as string };
    return row.later ? { state: 'later' } : { state: 'run', tenantId: row.tenant_id as string, input: row.input ?? {} };
  });
}

const END_CANCELLING = `
  update jobs set status = 'cancelled', finished_at = now(), error = null where id = any($1::uuid[]) and status = 'cancelling'`;

const CLAIM_QUEUES = `
  select queue, outcome, job_id::text, tenant_id::text, kind, input, attempt, max_attempts
  from queue_claim($1::text[], $2::text[])`;

/** What a queue's wake-up found (queue_claim, migration 0043). */
export type QueueClaim =
  | {
      queue: string;
      outcome: 'claimed';
      jobId: string;
      tenantId: string;
      kind: string;
      input: Record<string, unknown>;
      attempt: number;
      maxAttempts: number;
    }
  | { queue: string; outcome: 'busy' | 'later' | 'empty' };

/** Claims the next job of each queue for the worker pool beside it (one statement for many queues). */
export async function claimQueues(
  db: PreparedQueryable,
  claims: ReadonlyArray<{ queue: string; holder: string }>,
): Promise<QueueClaim[]> {
  const { rows } = await db.query({
    name: 'platform_claim_queues',
    text: CLAIM_QUEUES,
    values: [claims.map((c) => c.queue), claims.map((c) => c.holder)],
  });
  return rows.map(
    (r): QueueClaim =>
      r.outcome === 'claimed'
        ? {
            queue: r.queue as string,
            outcome: 'claimed',
            jobId: r.job_id as string,
            tenantId: r.tenant_id as string,
            kind: r.kind as string,
            input: (r.input ?? {}) as Record<string, unknown>,
            attempt: Number(r.attempt),
            maxAttempts: Number(r.max_attempts),
          }
        : { queue: r.queue as string, outcome: r.outcome as 'busy' | 'later' | 'empty' },
  );
}

/** Marks the attempt as running (idempotent); false when it may no longer write. */
export async function markRunning(
  db: CommonQueryMethods,
  jobId: string,
  attempt: number,
  holder: Holder = NO_HOLDER,
): Promise<boolean> {
  const result = await db.query(sql.unsafe`
    update jobs set status = 'running', ${attemptColumns(attempt, holder)}
    where id = ${jobId} and ${mayWrite(attempt)}`);
  return result.rowCount === 1;
}

const REPORT_PROGRESS = `
  update jobs set version = version + 1, updated_at = now(),
    progress = $2::jsonb, status = 'running', attempts = $3, locked_by = coalesce($4, locked_by),
    started_at = coalesce(started_at, $5::timestamptz, now())
  where id = $1 and job_attempt_may_write(status, attempts, $3)
  returning id`;

/**
 * Publishes progress; the first progress of an attempt also marks it running.
 * A prepared statement on the worker's own connections (see JobCompletions):
 * progress is on the path from a send to its answer, and losing the latest
 * progress in a server crash costs nothing, so it need not wait for a flush.
 */
export async function reportProgress(
  db: PreparedQueryable,
  jobId: string,
  attempt: number,
  progress: unknown,
  holder: Holder = NO_HOLDER,
): Promise<boolean> {
  const { rows } = await db.query({
    name: 'platform_report_progress',
    text: REPORT_PROGRESS,
    values: [jobId, JSON.stringify(progress ?? null), attempt, holder.lockedBy, holder.lockedAt?.toISOString() ?? null],
  });
  return rows.length === 1;
}

/**
 * A streamed answer's progress (its text so far) is left out of the final
 * state: the result carries the whole answer, and a stale prefix beside it
 * would only mislead. Other progress (steps done) stays.
 */
const withoutPartialText = sql.fragment`progress = case when jsonb_typeof(progress) = 'object' and progress ? 'text' then null else progress end`;

/** Records the result exactly once; false when the job is no longer this attempt's to finish. */
export async function completeJob(
  db: CommonQueryMethods,
  jobId: string,
  attempt: number,
  result: unknown,
  holder: Holder = NO_HOLDER,
): Promise<boolean> {
  const updated = await db.query(sql.unsafe`
    update jobs
    set status = 'succeeded', result = ${sql.jsonb((result ?? null) as never)}, error = null, finished_at = now(), not_before = null, ${attemptColumns(attempt, holder)},
      ${withoutPartialText}
    where id = ${jobId} and ${mayWrite(attempt)}`);
  return updated.rowCount === 1;
}

export type Completion = { jobId: string; attempt: number; result: unknown; holder: Holder };

// Arrays through unnest, not a jsonb recordset: the planner then expects a
// few rows and looks each job up by its key, instead of scanning jobs.
const COMPLETE_JOBS = `
  update jobs j
  set version = j.version + 1, updated_at = now(), not_before = null,
    status = 'succeeded', result = $2::jsonb -> (c.n::int - 1), error = null, finished_at = now(), attempts = c.attempt,
    progress = case when jsonb_typeof(j.progress) = 'object' and j.progress ? 'text' then null else j.progress end,
    locked_by = coalesce(c.locked_by, j.locked_by), started_at = coalesce(j.started_at, c.locked_at, now())
  from unnest($1::uuid[], $3::int4[], $4::text[], $5::timestamptz[]) with ordinality as c(id, attempt, locked_by, locked_at, n)
  where j.id = c.id and job_attempt_may_write(j.status, j.attempts, c.attempt)
  returning j.id::text`;

/**
 * Records many results in one statement (core/jobs/completions.ts batches
 * them): the ids of the jobs whose result was recorded. Each row is guarded
 * exactly as completeJob guards one. Ids must be distinct.
 */
export async function completeJobs(db: PreparedQueryable, completions: readonly Completion[]): Promise<Set<string>> {
  const { rows } = await db.query({
    name: 'platform_complete_jobs',
    text: COMPLETE_JOBS,
    values: [
      completions.map((c) => c.jobId),
      JSON.stringify(completions.map((c) => c.result ?? null)),
      completions.map((c) => c.attempt),
      completions.map((c) => c.holder.lockedBy),
      completions.map((c) => c.holder.lockedAt?.toISOString() ?? null),
    ],
  });
  return new Set(rows.map((r) => r.id as string));
}

/** A failed attempt that ends the job: 'failed', with its code and message. */
export async function failJob(
  db: CommonQueryMethods,
  jobId: string,
  attempt: number,
  failure: JobFailure,
  holder: Holder = NO_HOLDER,
): Promise<boolean> {
  // A failure's message may quote outside text: stored unmended it could be refused, leaving the job running.
  const error = { code: failure.code, message: storableText(failure.message), retrying: false };
  const updated = await db.query(sql.unsafe`
    update jobs set status = 'failed', error = ${sql.jsonb(error)}, finished_at = now(), not_before = null, ${attemptColumns(attempt, holder)}
    where id = ${jobId} and ${mayWrite(attempt)}`);
  return updated.rowCount === 1;
}

/**
 * Ends an attempt that must wait (JobWait, or a failure to retry): the job
 * is 'queued' until `until` (a cancel ends it at once meanwhile), and wakes
 * then (job_wait, migration 0043). `keepAttempt`: a wait, not a failure; the
 * next run is the same attempt. `error` is shown meanwhile (a retry's, with
 * retrying and retryAt); `progress`, when given, is kept for the next run.
 * `leaveQueue`: a serial job lets its queue go on while it waits. False when
 * the attempt may no longer write.
 */
export async function waitJob(
  db: CommonQueryMethods,
  wait: {
    jobId: string;
    attempt: number;
    keepAttempt: boolean;
    until: Date;
    error?: Record<string, unknown>;
    progress?: unknown;
    holder?: Holder;
    leaveQueue?: boolean;
  },
): Promise<boolean> {
  const holder = wait.holder ?? NO_HOLDER;
  const waited = await db.oneFirst(sql.type(z.object({ ok: z.boolean() }))`
    select job_wait(${wait.jobId}, ${wait.attempt}, ${wait.keepAttempt}, ${wait.until.toISOString()}::timestamptz,
      ${wait.error ? sql.jsonb(storableJson(wait.error) as never) : null}::jsonb, ${sql.jsonb((wait.progress ?? null) as never)}::jsonb, ${wait.progress !== undefined},
      ${holder.lockedBy}, ${holder.lockedAt?.toISOString() ?? null}::timestamptz, ${wait.leaveQueue ?? false}) as ok`);
  return waited;
}

/**
 * Gives a job back when its attempt could not record how it ended, not for
 * an outage (a refused result whose failure was refused too): queued again
 * with a wake-up at `until`, its attempt counted, as the dead-worker sweep
 * does for a dead worker's, so it never stays running while its worker
 * lives. It writes constants only, nothing the task produced. False when
 * the job is no longer this attempt's.
 */
export function handBackJob(
  db: CommonQueryMethods,
  hand: { jobId: string; attempt: number; until: Date; holder?: Holder },
): Promise<boolean> {
  const message = 'How this attempt ended could not be recorded; the job will run again.';
  return waitJob(db, {
    ...hand,
    keepAttempt: false,
    error: { code: 'result_not_recorded', message, retrying: true, retryAt: hand.until.toISOString() },
  });
}

/** Moves a waiting job's next run to `at` (now, when what it waits for arrived). */
export async function wakeJob(db: CommonQueryMethods, jobId: string, at: Date | 'now'): Promise<void> {
  await db.query(
    sql.unsafe`select job_wake(${jobId}, ${at === 'now' ? sql.fragment`now()` : sql.fragment`${at.toISOString()}::timestamptz`})`,
  );
}

/**
 * Cancels a job. One that is 'queued' is cancelled at once; if an attempt is
 * in fact running it lazily (it has not written 'running' yet), the
 * jobs_cancel_notify trigger tells its worker, which aborts it, and its
 * result is refused by the status. A job marked running becomes
 * 'cancelling': the worker holding it hears of it (job_cancel NOTIFY),
 * aborts the handler and ends it as 'cancelled'. Null when the job is
 * already final or already cancelling.
 */
export async function requestCancel(db: CommonQueryMethods, jobId: string): Promise<JobRow | null> {
  return db.maybeOne(jobRow`
    update jobs
    set status = case when status = 'queued' then 'cancelled' else 'cancelling' end,
        finished_at = case when status = 'queued' then now() end,
        error = null
    where id = ${jobId} and status in ('queued', 'running')
    returning *`);
}

/** Ends a job that was asked to stop; its result (if any came) is not recorded. */
export async function finishCancelled(db: CommonQueryMethods, jobId: string): Promise<boolean> {
  const updated = await db.query(sql.unsafe`
    update jobs set status = 'cancelled', finished_at = now(), error = null
    where id = ${jobId} and status = 'cancelling'`);
  return updated.rowCount === 1;
}
