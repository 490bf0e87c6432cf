// Waiting never holds a worker slot. A job that must wait (a retry's backoff,
// a Retry-After, a runner that has not picked up its work yet) is parked: it
// stays in Graphile Worker's table with its run_at (its place in the fair
// order) unchanged, locked by 'platform:parked' until its time, and the
// handler returns its slot at once. A job of a named queue keeps the queue
// locked while it waits, so a chat session's later turns still come after it.
// wake_parked_jobs() (migration 0037) unlocks due jobs; every worker process
// calls it on a timer (workers/parked-jobs.ts).
//
// The handler then throws JobParked so Graphile Worker neither deletes the
// job (its completion deletes by id) nor reschedules it: its failure update
// only touches rows still locked by its pool, and this one is not any more.
import { sql, type CommonQueryMethods } from '../db/pool.ts';

export const PARKED_BY = 'platform:parked';

/** Thrown by a handler after its job was parked; Graphile's own failure handling then finds nothing to do. */
export class JobParked extends Error {
  override name = 'JobParked';
  constructor(
    readonly until: Date,
    readonly why: string,
  ) {
    super(`parked until ${until.toISOString()}: ${why}`);
  }
}

/**
 * This attempt found its job finished or taken by another attempt: a sweep
 * gave the job to another worker while this process was frozen or cut off.
 * Handed to Graphile Worker as an error, never as a success: Graphile's
 * completion deletes a job by id alone (it would delete the job the other
 * attempt now holds, leaving its queue locked for ever), while its failure
 * path only touches a job this process still holds.
 */
export class JobLost extends Error {
  override name = 'JobLost';
  constructor() {
    super('the job is no longer this attempt\'s: another attempt finished or holds it');
  }
}

/** Graphile's backoff for attempt `attempt` (its fail_job: exp(least(attempts, 10)) s). */
export const backoffMs = (attempt: number) => Math.round(Math.exp(Math.min(attempt, 10)) * 1000);

/**
 * Parks a running Graphile job (and its queue, when it has one) until `until`.
 * `keepAttempt`: a wait, not a failure; the next run counts as the same attempt.
 * False when the job is no longer held by `lockedBy` (a dead-worker sweep let it go).
 */
export async function parkJob(
  db: CommonQueryMethods,
  job: { graphileJobId: string; lockedBy: string; until: Date; why: string; keepAttempt: boolean },
): Promise<boolean> {
  const parked = await db.maybeOneFirst(sql.unsafe`
    with parked as (
      update graphile_worker._private_jobs
      set locked_by = ${PARKED_BY}, locked_at = ${job.until.toISOString()}::timestamptz, last_error = ${job.why},
        attempts = case when ${job.keepAttempt} then greatest(attempts - 1, 0) else attempts end
      where id = ${job.graphileJobId} and locked_by = ${job.lockedBy}
      returning job_queue_id
    ), queue as (
      update graphile_worker._private_job_queues q set locked_by = ${PARKED_BY}, locked_at = ${job.until.toISOString()}::timestamptz
      where q.id in (select job_queue_id from parked) and q.locked_by = ${job.lockedBy}
      returning 1
    )
    select (select count(*) from parked)::int + 0 * (select count(*) from queue)::int as n`);
  return Number(parked) === 1;
}

/** Wakes the parked jobs whose time has come; how many. */
export async function wakeParkedJobs(db: CommonQueryMethods): Promise<number> {
  return Number(await db.oneFirst(sql.unsafe`select wake_parked_jobs() as n`));
}

/** When the next parked job is due, if any (for a worker's timer). */
export async function nextParkedDue(db: CommonQueryMethods): Promise<Date | null> {
  const due = await db.maybeOneFirst(sql.unsafe`
    select locked_at from graphile_worker._private_jobs where locked_by = ${PARKED_BY} order by locked_at limit 1`);
  return due ? new Date(due as string) : null;
}
