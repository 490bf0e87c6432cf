// How a worker moves a platform job through its states. Every update is
// guarded by the current status, so a retried or duplicated attempt can never
// write a second result or resurrect a finished job. Each change fires the
// jobs_notify trigger, which is how websocket subscribers hear about it.
import { sql, type CommonQueryMethods } from '../db/pool.ts';
import { JobRow } from './schema.ts';

const jobRow = sql.type(JobRow);

export type JobFailure = { code: string; message: string };

/** Marks the attempt as running; null when the job is already final (skip it). */
export async function startAttempt(db: CommonQueryMethods, jobId: string, attempt: number, lockedBy: string | null): Promise<JobRow | null> {
  return db.maybeOne(jobRow`
    update jobs
    set status = 'running', attempts = ${attempt}, locked_by = ${lockedBy}, started_at = coalesce(started_at, now())
    where id = ${jobId} and status in ('queued', 'running')
    returning *`);
}

export async function reportProgress(db: CommonQueryMethods, jobId: string, progress: unknown): Promise<boolean> {
  const result = await db.query(sql.unsafe`
    update jobs set progress = ${sql.jsonb(progress as never)}
    where id = ${jobId} and status = 'running'`);
  return result.rowCount === 1;
}

/** Records the result exactly once; false when another attempt already finished it. */
export async function completeJob(db: CommonQueryMethods, jobId: string, result: unknown): Promise<boolean> {
  const updated = await db.query(sql.unsafe`
    update jobs
    set status = 'succeeded', result = ${sql.jsonb((result ?? null) as never)}, error = null, finished_at = now()
    where id = ${jobId} and status in ('queued', 'running')`);
  return updated.rowCount === 1;
}

/**
 * A failed attempt: final failures end the job, others put it back to
 * 'queued' with the error marked as retrying, so clients can show it.
 */
export async function failAttempt(db: CommonQueryMethods, jobId: string, failure: JobFailure, final: boolean): Promise<void> {
  const error = { code: failure.code, message: failure.message, retrying: !final };
  await db.query(sql.unsafe`
    update jobs
    set status = ${final ? 'failed' : 'queued'},
        error = ${sql.jsonb(error)},
        finished_at = case when ${final} then now() else null end
    where id = ${jobId} and status in ('queued', 'running')`);
}

/**
 * Cancels a job that has not started. The Graphile job stays queued and is
 * skipped when a worker picks it up (startAttempt finds it final).
 */
export async function cancelQueuedJob(db: CommonQueryMethods, jobId: string): Promise<JobRow | null> {
  return db.maybeOne(jobRow`
    update jobs set status = 'cancelled', finished_at = now(), error = null
    where id = ${jobId} and status = 'queued'
    returning *`);
}
