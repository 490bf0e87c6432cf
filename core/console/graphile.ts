// What the console shows of the queue, from the platform's own jobs table:
// whose a job is and where it stands are the platform's rows; Graphile
// Worker's jobs are only wake-ups (docs/engine.md), read through its public
// view (graphile_worker.jobs) where the console names one.
import { sql } from '../db/pool.ts';

/**
 * Ready / running / waiting counts of open platform jobs aliased `j`:
 * running is held by an attempt (marked running); ready is queued, due and next in its serial
 * queue (if it has one); waiting is the rest (its time to come, or behind
 * the job ahead of it in its queue).
 */
export const JOB_STATE_COUNTS = sql.fragment`
  count(*) filter (where j.status = 'queued' and (j.not_before is null or j.not_before <= now())
    and (j.queue_name is null or j.seq is null or not exists (select 1 from jobs e where e.queue_name = j.queue_name
      and e.seq is not null and e.status in ('queued', 'running', 'cancelling') and e.seq < j.seq)))::int as ready,
  count(*) filter (where j.status <> 'queued')::int as running,
  count(*) filter (where j.status = 'queued' and (j.not_before > now()
    or (j.queue_name is not null and j.seq is not null and exists (select 1 from jobs e where e.queue_name = j.queue_name
      and e.seq is not null and e.status in ('queued', 'running', 'cancelling') and e.seq < j.seq))))::int as waiting`;

/** Whether platform job `j` is open (the partial index of open jobs serves it). */
export const IS_OPEN = sql.fragment`j.status in ('queued', 'running', 'cancelling')`;

/** The Graphile wake-up of platform job `j`: its own, a wait's (keyed by its id), or its serial queue's. */
export const WAKE_UP_OF_JOB = sql.fragment`(
  select g.id, g.task_identifier, g.run_at, g.attempts, g.max_attempts, g.last_error, g.locked_at, g.locked_by, g.key
  from graphile_worker.jobs g
  where g.id = j.graphile_job_id or g.key = 'j:' || j.id::text or g.key = 'q:' || j.queue_name
  order by g.locked_at desc nulls last, g.run_at limit 1)`;
