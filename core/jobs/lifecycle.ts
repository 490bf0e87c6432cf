// How a worker moves a platform job through its states. Every write is
// guarded by the status and by the attempt number (a fencing token, see
// mayWrite): an attempt that was given up on (its worker looked dead, or the
// database was away) and runs on somewhere can never write progress, a
// result or a failure over the attempt that replaced it, nor resurrect a
// finished job. Each change fires the jobs_notify trigger, which is how
// websocket subscribers hear about it.
//
// 'running' is written lazily: a first attempt starts with no read, a retry
// with one (openAttempts); either marks the job running only with its first
// progress, after WORKER_RUNNING_AFTER_MS, or not at all when its final write
// comes first. A quick job so costs one write (its result) instead of two.
import { sql, type CommonQueryMethods } from '../db/pool.ts';
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
  attempts = ${attempt}, locked_by = coalesce(${holder.lockedBy}, locked_by),
  started_at = coalesce(started_at, ${holder.lockedAt ? holder.lockedAt.toISOString() : null}::timestamptz, now())`;

/**
 * The worker's two hot statements run on plain node-postgres with named
 * (prepared) statements, not through slonik: measured per statement, that
 * halves the CPU of the process and the server (see JobCompletions).
 */
export type PreparedQueryable = {
  query: (statement: { name: string; text: string; values: unknown[] }) => Promise<{ rows: Array<Record<string, unknown>> }>;
};

const OPEN_ATTEMPTS = `
  with stopping as (
    update jobs set status = 'cancelled', finished_at = now(), error = null
    where id = any($1::uuid[]) and status = 'cancelling'
    returning id
  )
  select id::text, status from jobs where id = any($1::uuid[]) and id not in (select id from stopping)`;

/**
 * Whether attempts of these jobs should run (one answer per id): one read,
 * no write. A job that is final (or gone) is skipped; one asked to stop while
 * it waited ends as cancelled here.
 */
export async function openAttempts(db: PreparedQueryable, jobIds: readonly string[]): Promise<boolean[]> {
  const { rows } = await db.query({ name: 'platform_open_attempts', text: OPEN_ATTEMPTS, values: [jobIds] });
  const status = new Map(rows.map((r) => [r.id as string, r.status as string]));
  return jobIds.map((id) => status.get(id) === 'queued' || status.get(id) === 'running');
}

/** Marks the attempt as running (idempotent); false when it may no longer write. */
export async function markRunning(db: CommonQueryMethods, jobId: string, attempt: number, holder: Holder = NO_HOLDER): Promise<boolean> {
  const result = await db.query(sql.unsafe`
    update jobs set status = 'running', ${attemptColumns(attempt, holder)}
    where id = ${jobId} and ${mayWrite(attempt)}`);
  return result.rowCount === 1;
}

const REPORT_PROGRESS = `
  update jobs set progress = $2::jsonb, status = 'running', attempts = $3, locked_by = coalesce($4, locked_by),
    started_at = coalesce(started_at, $5::timestamptz, now())
  where id = $1 and job_attempt_may_write(status, attempts, $3)
  returning id`;

/**
 * Publishes progress; the first progress of an attempt also marks it running.
 * A prepared statement on the worker's own connections (see JobCompletions):
 * progress is on the path from a send to its answer, and losing the latest
 * progress in a server crash costs nothing, so it need not wait for a flush.
 */
export async function reportProgress(db: PreparedQueryable, jobId: string, attempt: number, progress: unknown, holder: Holder = NO_HOLDER): Promise<boolean> {
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
export async function completeJob(db: CommonQueryMethods, jobId: string, attempt: number, result: unknown, holder: Holder = NO_HOLDER): Promise<boolean> {
  const updated = await db.query(sql.unsafe`
    update jobs
    set status = 'succeeded', result = ${sql.jsonb((result ?? null) as never)}, error = null, finished_at = now(), ${attemptColumns(attempt, holder)},
      ${withoutPartialText}
    where id = ${jobId} and ${mayWrite(attempt)}`);
  return updated.rowCount === 1;
}

export type Completion = { jobId: string; attempt: number; result: unknown; holder: Holder };

// Arrays through unnest, not a jsonb recordset: the planner then expects a
// few rows and looks each job up by its key, instead of scanning jobs.
const COMPLETE_JOBS = `
  update jobs j
  set status = 'succeeded', result = $2::jsonb -> (c.n::int - 1), error = null, finished_at = now(), attempts = c.attempt,
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

/**
 * A failed attempt: final failures end the job, others put it back to
 * 'queued' with the error marked as retrying, so clients can show it.
 */
export async function failAttempt(
  db: CommonQueryMethods, jobId: string, attempt: number, failure: JobFailure, final: boolean, holder: Holder = NO_HOLDER, retryAt?: Date,
  /** A final failure keeps the task's input, so an operator can retry the job after Graphile let it go. */
  input?: Record<string, unknown>,
): Promise<void> {
  const error = { code: failure.code, message: failure.message, retrying: !final, ...(retryAt ? { retryAt: retryAt.toISOString() } : {}) };
  const kept = final && input ? sql.jsonb(input as never) : null;
  await db.query(sql.unsafe`
    update jobs
    set status = ${final ? 'failed' : 'queued'},
        error = ${sql.jsonb(error)},
        retry_input = ${kept}::jsonb,
        finished_at = case when ${final} then now() else null end,
        ${attemptColumns(attempt, holder)}
    where id = ${jobId} and ${mayWrite(attempt)}`);
}

/**
 * An attempt that waits parked (JobWait, core/jobs/park.ts): the job is
 * 'queued' meanwhile (so a cancel ends it at once, and the dead-worker sweep
 * leaves it alone) and counts the attempt as not yet made, so the same
 * attempt may write again when it resumes. Its progress, when given, is kept
 * for it. False when the attempt may no longer write.
 */
export async function waitAttempt(db: CommonQueryMethods, jobId: string, attempt: number, progress: unknown): Promise<boolean> {
  const updated = await db.query(sql.unsafe`
    update jobs set status = 'queued', attempts = ${attempt - 1},
      progress = case when ${progress === undefined} then progress else ${sql.jsonb((progress ?? null) as never)} end
    where id = ${jobId} and ${mayWrite(attempt)}`);
  return updated.rowCount === 1;
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
