-- The engine: tenants and their members (the accounts issue extends them),
-- platform jobs that clients poll and subscribe to, worker heartbeats and the
-- record of scheduled runs.

create table tenants (
  id uuid primary key default gen_random_uuid(),
  name text not null check (length(name) between 1 and 200),
  settings jsonb not null default '{}'::jsonb,
  created_at timestamptz not null default now()
);

create table users (
  id uuid primary key default gen_random_uuid(),
  email text not null check (length(email) between 3 and 320),
  display_name text,
  created_at timestamptz not null default now()
);
create unique index users_email_key on users (lower(email));

create table tenant_memberships (
  tenant_id uuid not null references tenants (id) on delete cascade,
  user_id uuid not null references users (id) on delete cascade,
  role text not null check (role in ('admin', 'viewer')),
  created_at timestamptz not null default now(),
  primary key (tenant_id, user_id)
);
create index tenant_memberships_user_idx on tenant_memberships (user_id);

-- Graphile Worker deletes finished jobs, so the state clients see lives here.
create table jobs (
  id uuid primary key,
  tenant_id uuid not null references tenants (id) on delete cascade,
  kind text not null check (length(kind) between 1 and 100),
  status text not null default 'queued'
    check (status in ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
  queue_name text,
  attempts integer not null default 0,
  -- The Graphile Worker lock holder of the current attempt, so the dead-worker
  -- sweep can tell clients which running jobs lost their worker.
  locked_by text,
  max_attempts integer not null default 25,
  progress jsonb,
  result jsonb,
  error jsonb,
  -- Bumped on every change so a listener can drop stale or repeated events.
  version integer not null default 1,
  created_at timestamptz not null default now(),
  started_at timestamptz,
  finished_at timestamptz,
  updated_at timestamptz not null default now()
);
create index jobs_tenant_created_idx on jobs (tenant_id, created_at desc);
create index jobs_finished_at_idx on jobs (finished_at) where finished_at is not null;

create function jobs_touch() returns trigger language plpgsql as $$
begin
  new.version := old.version + 1;
  new.updated_at := now();
  return new;
end;
$$;
create trigger jobs_touch before update on jobs
  for each row execute function jobs_touch();

-- Every change of a job reaches each api replica's LISTEN connection. The
-- payload carries the whole public row when it fits in NOTIFY's 8000 bytes,
-- otherwise only the id and version, and the listener reads the row.
create function jobs_notify() returns trigger language plpgsql as $$
declare
  payload text;
begin
  payload := json_build_object(
    'id', new.id, 'tenant_id', new.tenant_id, 'kind', new.kind, 'status', new.status,
    'attempts', new.attempts, 'max_attempts', new.max_attempts,
    'progress', new.progress, 'result', new.result, 'error', new.error,
    'version', new.version, 'created_at', new.created_at, 'started_at', new.started_at,
    'finished_at', new.finished_at, 'updated_at', new.updated_at)::text;
  if octet_length(payload) > 7900 then
    payload := json_build_object('id', new.id, 'tenant_id', new.tenant_id,
      'version', new.version, 'truncated', true)::text;
  end if;
  perform pg_notify('job_events', payload);
  return null;
end;
$$;
create trigger jobs_notify after update on jobs
  for each row
  when (old.status is distinct from new.status
     or old.progress is distinct from new.progress
     or old.result is distinct from new.result
     or old.error is distinct from new.error
     or old.attempts is distinct from new.attempts)
  execute function jobs_notify();

-- Each worker process writes one row per Graphile Worker worker id and keeps
-- it fresh; the dead-worker sweep unlocks jobs held by ids that went stale.
create table worker_heartbeats (
  worker_id text primary key,
  pool_id text not null,
  hostname text not null,
  pid integer not null,
  started_at timestamptz not null default now(),
  last_seen_at timestamptz not null default now()
);
create index worker_heartbeats_pool_idx on worker_heartbeats (pool_id);

-- One row per run of a scheduled (cron) task.
create table scheduled_job_runs (
  id bigint generated always as identity primary key,
  identifier text not null,
  task text not null,
  scheduled_for timestamptz,
  started_at timestamptz not null default now(),
  finished_at timestamptz,
  status text not null default 'running' check (status in ('running', 'succeeded', 'failed')),
  detail jsonb,
  error text
);
create index scheduled_job_runs_identifier_idx on scheduled_job_runs (identifier, started_at desc);
