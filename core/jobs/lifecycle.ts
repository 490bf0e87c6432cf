// How a worker moves a platform job through its states. Every update is
// guarded by the current status and by the attempt number (a fencing token):
// an attempt that was given up on (its worker looked dead, or the database
// was away) and runs on somewhere can never write progress, a result or a
// failure over the attempt that replaced it, nor resurrect a finished job. Each change fires the
// jobs_notify trigger, which is how websocket subscribers hear about it.
import { sql, type CommonQueryMethods } from '../db/pool.ts';
import { JobRow } from './schema.ts';

const jobRow = sql.type(JobRow);

export type JobFailure = { code: string; message: string };

/**
 * Marks the attempt as running; null when the job is already final (skip it).
 * A job asked to stop while it was between attempts ends as cancelled here.
 */
export async function startAttempt(db: CommonQueryMethods, jobId: string, attempt: number, lockedBy: string | null): Promise<JobRow | null> {
  const started = await db.maybeOne(jobRow`
    update jobs
    set status = 'running', attempts = ${attempt}, locked_by = ${lockedBy}, started_at = coalesce(started_at, now())
    where id = ${jobId} and status in ('queued', 'running')
    returning *`);
  if (!started) await finishCancelled(db, jobId);
  return started;
}

export async function reportProgress(db: CommonQueryMethods, jobId: string, attempt: number, progress: unknown): Promise<boolean> {
  const result = await db.query(sql.unsafe`
    update jobs set progress = ${sql.jsonb(progress as never)}
    where id = ${jobId} and status = 'running' and attempts = ${attempt}`);
  return result.rowCount === 1;
}

/** Records the result exactly once; false when another attempt already finished it. */
export async function completeJob(db: CommonQueryMethods, jobId: string, attempt: number, result: unknown): Promise<boolean> {
  const updated = await db.query(sql.unsafe`
    update jobs
    set status = 'succeeded', result = ${sql.jsonb((result ?? null) as never)}, error = null, finished_at = now()
    where id = ${jobId} and status = 'running' and attempts = ${attempt}`);
  return updated.rowCount === 1;
}

/**
 * A failed attempt: final failures end the job, others put it back to
 * 'queued' with the error marked as retrying, so clients can show it.
 */
export async function failAttempt(db: CommonQueryMethods, jobId: string, attempt: number, failure: JobFailure, final: boolean): Promise<void> {
  const error = { code: failure.code, message: failure.message, retrying: !final };
  await db.query(sql.unsafe`
    update jobs
    set status = ${final ? 'failed' : 'queued'},
        error = ${sql.jsonb(error)},
        finished_at = case when ${final} then now() else null end
    where id = ${jobId} and status in ('queued', 'running') and attempts = ${attempt}`);
}

/**
 * Cancels a job. One that has not started is cancelled at once (the Graphile
 * job stays queued and is skipped when a worker picks it up: startAttempt
 * finds it final). A running one becomes 'cancelling': the worker holding it
 * hears of it (job_cancel NOTIFY), aborts the handler and ends it as
 * 'cancelled'. Null when the job is already final or already cancelling.
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
