-- The agent workspace: what makes an agent's work visible (activity) and
-- configurable (skills, memory). Every row carries tenant_id; every read
-- filters by it.

-- A job may belong to a chat session (a chat turn, a channel delivery of
-- that session's answer ...). Enqueuers set it (JobSpec.sessionId); the
-- session's activity reads its jobs through it.
alter table jobs add column session_id uuid references chat_sessions (id) on delete set null;
create index jobs_session_idx on jobs (session_id, created_at) where session_id is not null;
update jobs j set session_id = s.id
  from chat_sessions s
  where j.kind = 'chat.turn' and j.queue_name ~ '^chat:[0-9a-f-]{36}$'
    and s.id = substring(j.queue_name from 6)::uuid and s.tenant_id = j.tenant_id;

-- The jobs row holds only the current state, so a session's history of job
-- events (queued, started, first progress, finished) is appended here by a
-- trigger, in the same transaction as the change it records. Only jobs of a
-- session are recorded, and progress only once per attempt (its later text
-- is the job's own progress), so streaming writes no extra rows.
create table session_job_events (
  id bigint generated always as identity primary key,
  tenant_id uuid not null references tenants (id) on delete cascade,
  session_id uuid not null references chat_sessions (id) on delete cascade,
  job_id uuid not null references jobs (id) on delete cascade,
  job_kind text not null,
  event text not null check (event in ('queued', 'started', 'progress', 'cancelling', 'succeeded', 'failed', 'cancelled')),
  attempt integer not null default 0,
  at timestamptz not null default now()
);
create index session_job_events_page_idx on session_job_events (session_id, at, id);
create index session_job_events_job_idx on session_job_events (job_id);

create function session_job_event() returns trigger language plpgsql as $$
declare
  ev text;
  ts timestamptz;
begin
  if tg_op = 'INSERT' then
    ev := 'queued';
    ts := new.created_at;
  elsif new.status is distinct from old.status then
    ev := case new.status when 'running' then 'started' else new.status end;
    ts := case when new.status = 'running' then coalesce(new.started_at, now())
               when new.finished_at is not null then new.finished_at else now() end;
  elsif old.progress is null and new.progress is not null then
    ev := 'progress';
    ts := now();
  else
    return null;
  end if;
  insert into session_job_events (tenant_id, session_id, job_id, job_kind, event, attempt, at)
  values (new.tenant_id, new.session_id, new.id, new.kind, ev, new.attempts, ts);
  return null;
end;
$$;
create trigger jobs_session_event_insert after insert on jobs
  for each row when (new.session_id is not null) execute function session_job_event();
create trigger jobs_session_event_update after update on jobs
  for each row when (new.session_id is not null and (old.status is distinct from new.status
    or (old.progress is null and new.progress is not null)))
  execute function session_job_event();
insert into session_job_events (tenant_id, session_id, job_id, job_kind, event, attempt, at)
  select tenant_id, session_id, id, kind, 'queued', 0, created_at from jobs where session_id is not null;

-- Activity lists page by (created_at, id) per tenant.
create index chat_messages_session_time_idx on chat_messages (session_id, created_at, id);
create index chat_sessions_agent_idx on chat_sessions (tenant_id, agent_id, created_at desc, id desc);
create index chat_messages_attachments_idx on chat_messages (tenant_id, created_at desc, id desc)
  where attachments <> '[]'::jsonb;
create index scheduled_job_runs_started_idx on scheduled_job_runs (started_at desc, id desc);

-- Skills: a directory with SKILL.md and files, recorded by sync for the
-- tenant that synced it (one name per tenant). files holds every file's
-- path, SHA-256 and size; tree_sha256 hashes that list, so changed bytes
-- under the same version are recognised and refused.
create table skills (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references tenants (id) on delete cascade,
  name text not null check (name ~ '^[a-z0-9](-?[a-z0-9])*$' and length(name) <= 64),
  description text not null check (length(description) between 1 and 1024),
  version text check (length(version) between 1 and 64),
  instructions text not null,
  manifest jsonb not null,
  manifest_sha256 text not null,
  tree_sha256 text not null,
  files jsonb not null,
  total_bytes bigint not null,
  allowed_tools text[] not null default '{}',
  env_schema jsonb not null default '[]'::jsonb,
  published boolean not null default false,
  published_at timestamptz,
  synced_by uuid references users (id) on delete set null,
  synced_at timestamptz not null default now(),
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (tenant_id, name)
);
create index skills_page_idx on skills (tenant_id, created_at desc, id desc);

-- A tenant's configuration of a skill: plain values in values_json, secret
-- ones sealed (AES-256-GCM, data key id recorded) with their last four
-- characters for the masked view.
create table skill_configs (
  tenant_id uuid not null references tenants (id) on delete cascade,
  skill_id uuid not null references skills (id) on delete cascade,
  values_json jsonb not null default '{}'::jsonb,
  secrets jsonb not null default '{}'::jsonb,
  updated_by uuid references users (id) on delete set null,
  updated_at timestamptz not null default now(),
  primary key (tenant_id, skill_id)
);

-- Skills registered through the retired registration endpoints. Nothing
-- writes here any more; rows that exist stay for audit and explicit re-import.
create table legacy_skill_registrations (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references tenants (id) on delete cascade,
  name text not null,
  metadata jsonb not null default '{}'::jsonb,
  registered_at timestamptz not null default now()
);

-- Uses of the tools a tenant's agents have (Agent API operations, skills in a turn).
create table tool_uses (
  tenant_id uuid not null references tenants (id) on delete cascade,
  tool text not null check (length(tool) between 1 and 200),
  uses bigint not null default 0,
  last_used_at timestamptz not null default now(),
  primary key (tenant_id, tool)
);

-- Memory: per-tenant settings (no row: the defaults) and named text files.
create table memory_settings (
  tenant_id uuid primary key references tenants (id) on delete cascade,
  enabled boolean not null,
  retention_days integer not null check (retention_days between 1 and 3650),
  max_files integer not null check (max_files between 1 and 1000),
  max_file_bytes integer not null check (max_file_bytes between 1 and 262144),
  max_total_bytes integer not null check (max_total_bytes between 1 and 8388608),
  updated_by uuid references users (id) on delete set null,
  updated_at timestamptz not null default now()
);

create table memory_files (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references tenants (id) on delete cascade,
  name text not null check (name ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$' and position('..' in name) = 0),
  content text not null,
  bytes integer not null check (bytes >= 0),
  created_by uuid references users (id) on delete set null,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (tenant_id, name)
);
create index memory_files_page_idx on memory_files (tenant_id, created_at desc, id desc);
create index memory_files_updated_idx on memory_files (updated_at);
