// Jobs that share a queue name run one at a time, in the order they were
// added (a chat session's turns, a channel's replies). Graphile Worker's queue
// lock keeps them apart, and a parked job keeps its queue locked while it
// waits (park.ts). The soak still saw a reply overtaken by a later one of its
// queue, about once in 1,800; the cause found is in serial-batches.ts (a
// batch's later job given back after its queue was let go). So that no other
// path can do the same, the attempt itself checks: a job whose queue holds
// an earlier job still to run (its platform job open, in any state, of a kind
// this worker runs: one no worker runs must not hold the queue) gives its
// place back at once, without counting an attempt, and waits parked without
// holding the queue, so the earlier job can take it; it looks again when it
// wakes (just after the earlier job's own time, or a second later when a
// worker holds that job). One indexed read when nothing is ahead, which is
// nearly always.
import { z } from 'zod';
import { sql, type CommonQueryMethods } from '../db/pool.ts';
import { PARKED_BY } from './park.ts';

/** How long after the earlier job's time the yielding one looks again. */
export const YIELD_MARGIN_MS = 100;

export type QueueTurn =
  | { ahead: null }
  /** `until`: when it looks again; null when the job was no longer this attempt's (a sweep let it go). */
  | { ahead: string; until: Date | null };

const Outcome = z.object({ ahead: z.string().nullable(), until_ms: z.number().nullable() });

/**
 * Whether the Graphile job `graphileJobId` of queue `queueId`, held by
 * `lockedBy`, is next in its queue; if an earlier job is still to run, the
 * job is parked behind it (its queue let go) in the same statement.
 */
export async function takeQueueTurn(
  db: CommonQueryMethods,
  job: { graphileJobId: string; queueId: number | string; lockedBy: string },
  /** The kinds this worker runs: a job of another kind (one a newer or older version runs) is not waited for. */
  kinds: readonly string[],
): Promise<QueueTurn> {
  const outcome = await db.one(sql.type(Outcome)`
    with ahead as (
      -- The queue's earlier jobs in id order, by index (usually none), up to
      -- the first whose platform job is open: a scalar subquery, so each is
      -- one primary-key probe rather than a join over every open job.
      -- Its time: a parked one's wake; one held by a worker (or a worker gone
      -- away, until the sweep) is looked at again in a second; else its run_at.
      select e.id, case when e.locked_by = ${PARKED_BY} then e.locked_at
          when e.locked_by is not null then now() + interval '1 second' else e.run_at end as due
      from graphile_worker._private_jobs e
      where e.job_queue_id = ${job.queueId} and e.id < ${job.graphileJobId} and e.attempts < e.max_attempts
        and coalesce((select job_is_open(j.status) and j.kind = any(${sql.array([...kinds], 'text')})
          from jobs j where j.id = (e.payload ->> 'jobId')::uuid), false)
      order by e.id limit 1
    ), yielded as (
      update graphile_worker._private_jobs g
      set locked_by = ${PARKED_BY}, attempts = greatest(g.attempts - 1, 0),
        locked_at = greatest(now(), (select due from ahead)) + ${YIELD_MARGIN_MS} * interval '1 millisecond',
        last_error = 'waits for job ' || (select id from ahead) || ', ahead of it in its queue'
      where g.id = ${job.graphileJobId} and g.locked_by = ${job.lockedBy} and exists (select 1 from ahead)
      returning g.job_queue_id, g.locked_at
    ), released as (
      -- Runs whether or not the select reads it (a data-modifying WITH always does).
      update graphile_worker._private_job_queues q set locked_by = null, locked_at = null
      where q.id = (select job_queue_id from yielded) and q.locked_by = ${job.lockedBy}
    )
    select (select id::text from ahead) as ahead, (select extract(epoch from locked_at) * 1000 from yielded)::float8 as until_ms`);
  if (outcome.ahead === null) return { ahead: null };
  return { ahead: outcome.ahead, until: outcome.until_ms === null ? null : new Date(outcome.until_ms) };
}
