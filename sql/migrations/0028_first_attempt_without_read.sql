-- A first attempt starts without reading its platform job (workers/define-task.ts):
-- the only way such a job can have become final before its first pick is
-- that it was cancelled while queued, or deleted with its tenant. Both now
-- take the Graphile job out of the queue in the same transaction, so no
-- worker picks it up. A Graphile job that is locked already is running: a
-- cancel reaches its worker by job_cancel (0027), a deleted row refuses
-- every write of the attempt.
--
-- jobs.graphile_job_id is the Graphile job that enqueue created with the row
-- (core/jobs/enqueue.ts, core/chat/send.ts).
alter table jobs add column graphile_job_id bigint;

-- Jobs enqueued before this migration: unfinished ones learn their Graphile
-- job (found by the platform job id in its payload, which Graphile's public
-- view does not show), and the Graphile jobs of rows already final or gone
-- leave the queue now, as the triggers below make them leave from here on.
-- complete_jobs() leaves locked (running) jobs alone.
update jobs j set graphile_job_id = g.id
from graphile_worker._private_jobs g
where g.payload->>'jobId' = j.id::text and j.status in ('queued', 'running', 'cancelling');

select graphile_worker.complete_jobs(array(
  select g.id from graphile_worker._private_jobs g
  where g.payload->>'jobId' is not null
    and not exists (select 1 from jobs j where j.id::text = g.payload->>'jobId' and j.status in ('queued', 'running', 'cancelling'))));

create function jobs_release_graphile_job() returns trigger language plpgsql as $$
begin
  -- complete_jobs() leaves locked jobs alone: those are running.
  perform graphile_worker.complete_jobs(array[old.graphile_job_id]);
  return null;
end;
$$;

create trigger jobs_release_graphile_on_cancel
  after update of status on jobs
  for each row
  when (old.status = 'queued' and new.status = 'cancelled' and old.graphile_job_id is not null)
  execute function jobs_release_graphile_job();

create trigger jobs_release_graphile_on_delete
  after delete on jobs
  for each row
  when (old.status in ('queued', 'running', 'cancelling') and old.graphile_job_id is not null)
  execute function jobs_release_graphile_job();

