-- The operator console (/console): what it shows that the schema did not
-- keep yet, and the audit of what operators do there.

-- 1. Operator actions, each with who, when and why. The operator's e-mail is
-- copied so the record outlives the account; targets are kept as ids (a job
-- row may be swept by retention while its audit stays).
create table operator_actions (
  id bigint generated always as identity primary key,
  at timestamptz not null default now(),
  operator_id uuid references users (id) on delete set null,
  operator_email text not null,
  action text not null check (action in ('job.retry', 'job.cancel', 'tenant.suspend', 'tenant.resume')),
  tenant_id uuid references tenants (id) on delete set null,
  job_id uuid,
  reason text not null check (length(reason) between 1 and 500),
  outcome text not null check (length(outcome) <= 500)
);
create index operator_actions_at_idx on operator_actions (at desc, id desc);
create index operator_actions_job_idx on operator_actions (job_id) where job_id is not null;
create index operator_actions_tenant_idx on operator_actions (tenant_id) where tenant_id is not null;

-- 2. A job's failed attempts. The jobs row keeps only the last error; this
-- keeps each one (a retry's, and the final one), written by a trigger in the
-- failing write's transaction. Only failures write here, so a job that
-- succeeds costs nothing (measured: recording every change of every job cost
-- a tenth of the no-op job throughput). A job's other moments are its row's
-- own times, and a chat session's job has its events in session_job_events.
-- The console's retry adds its 'queued' row itself.
create table job_history (
  id bigint generated always as identity primary key,
  job_id uuid not null references jobs (id) on delete cascade,
  event text not null check (event in ('queued', 'failed', 'error')),
  attempt integer not null,
  at timestamptz not null default now(),
  error jsonb
);
create index job_history_job_idx on job_history (job_id, id);

create function jobs_record_failure() returns trigger language plpgsql as $$
begin
  insert into job_history (job_id, event, attempt, at, error)
  values (new.id, case when new.status = 'failed' then 'failed' else 'error' end, new.attempts,
    coalesce(new.finished_at, now()), new.error);
  return null;
end;
$$;
create trigger jobs_record_failure after update of error on jobs
  for each row when (new.error is not null and new.error is distinct from old.error)
  execute function jobs_record_failure();

-- 3. What a retry needs once Graphile Worker has let a failed job go: its
-- input, written with the final failure only (core/jobs/lifecycle.ts).
alter table jobs add column retry_input jsonb;

-- 4. The console's job list pages newest first across all tenants; open
-- jobs and failed ones have small partial indexes of their own (few jobs
-- are open at a time, failures are rare), so those filters never walk the
-- whole history.
create index jobs_created_idx on jobs (created_at desc, id desc);
create index jobs_open_created_idx on jobs (created_at desc, id desc) where status in ('queued', 'running', 'cancelling');
create index jobs_failed_idx on jobs (finished_at desc, id desc) where status = 'failed';

-- 5. What a worker process tells about itself with its heartbeat.
alter table worker_heartbeats
  add column version text,
  add column concurrency integer,
  add column io_concurrency integer;

-- 6. The console hears what changes besides jobs (those come by job_events
-- and Graphile's jobs:insert): processes coming and going, cron runs, operator
-- actions, suspensions. All are rare; the payload names what changed.
create function console_notify() returns trigger language plpgsql as $$
begin
  perform pg_notify('console_events', tg_argv[0]);
  return null;
end;
$$;
-- Per row: a heartbeat is an insert that mostly updates (on conflict), which
-- fires no row-level insert trigger.
create trigger worker_heartbeats_console after insert or delete on worker_heartbeats
  for each row execute function console_notify('workers');
create trigger scheduled_job_runs_console after insert or update on scheduled_job_runs
  for each statement execute function console_notify('schedules');
create trigger operator_actions_console after insert on operator_actions
  for each statement execute function console_notify('audit');
create trigger tenants_suspension_console after update of suspended_at on tenants
  for each statement execute function console_notify('tenants');
