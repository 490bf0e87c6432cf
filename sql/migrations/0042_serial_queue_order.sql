-- A job of a named queue never runs before an earlier job of its queue
-- (core/jobs/queue-order.ts). The soak saw it happen about once in 1,800
-- channel replies: a parked reply overtaken by the next one right at its
-- wake. Each attempt of a queued job now looks for an earlier job of its
-- queue still to run and, finding one, gives its place back and waits
-- parked without holding the queue. That needs the queue's jobs by id:
create index platform_queue_order on graphile_worker._private_jobs (job_queue_id, id) where job_queue_id is not null;

-- A job that gave its place back is parked without holding its queue, so
-- several parked jobs may share one: a queue parked by one of them is let go
-- when its own time has come (a parked holder writes its time on both rows),
-- not when another of its jobs wakes. Parked queues are found by their own
-- index, so a queue whose time passed is let go even if no job of it wakes
-- then (its holder woken or gone some other way).
create index platform_parked_queues on graphile_worker._private_job_queues (locked_at) where locked_by = 'platform:parked';

create or replace function wake_parked_jobs() returns integer
language plpgsql as $$
declare
  woken integer;
begin
  with due as (
    update graphile_worker._private_jobs set locked_by = null, locked_at = null
    where locked_by = 'platform:parked' and locked_at <= now()
    returning 1
  ), queues as (
    update graphile_worker._private_job_queues q set locked_by = null, locked_at = null
    where q.locked_by = 'platform:parked' and q.locked_at <= now()
  )
  select count(*)::int into woken from due;
  if woken > 0 then
    perform pg_notify('jobs:insert', json_build_object('count', woken, 'woken', txid_current())::text);
  end if;
  return woken;
end;
$$;

-- A cancelled or deleted job leaves Graphile's queue (0028); a parked one too,
-- and the queue it held (the same time on both rows) is let go.
create or replace function jobs_release_graphile_job() returns trigger language plpgsql as $$
begin
  -- complete_jobs() leaves locked jobs alone: those are running.
  perform graphile_worker.complete_jobs(array[old.graphile_job_id]);
  with gone as (
    delete from graphile_worker._private_jobs where id = old.graphile_job_id and locked_by = 'platform:parked'
    returning job_queue_id, locked_at
  )
  update graphile_worker._private_job_queues q set locked_by = null, locked_at = null
  from gone where q.id = gone.job_queue_id and q.locked_by = 'platform:parked' and q.locked_at = gone.locked_at;
  return null;
end;
$$;
