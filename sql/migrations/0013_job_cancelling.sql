-- A running job can be cancelled: the platform marks it 'cancelling', the
-- worker holding it aborts the handler and ends it as 'cancelled'.
alter table jobs drop constraint jobs_status_check;
alter table jobs add constraint jobs_status_check
  check (status in ('queued', 'running', 'cancelling', 'succeeded', 'failed', 'cancelled'));

-- Workers LISTEN on job_cancel to hear about their own jobs at once. The
-- payload is only the id: the worker that holds it knows everything else.
create function jobs_cancel_notify() returns trigger language plpgsql as $$
begin
  perform pg_notify('job_cancel', new.id::text);
  return null;
end;
$$;
create trigger jobs_cancel_notify after update of status on jobs
  for each row when (new.status = 'cancelling' and old.status is distinct from 'cancelling')
  execute function jobs_cancel_notify();

-- Jobs still asked to stop, for a worker that (re)connects its LISTEN.
create index jobs_cancelling_idx on jobs (id) where status = 'cancelling';

-- Company runs mirror their job's status, so they can be 'cancelling' too.
alter table company_runs drop constraint company_runs_status_check;
alter table company_runs add constraint company_runs_status_check
  check (status in ('queued', 'running', 'cancelling', 'succeeded', 'failed', 'cancelled'));
