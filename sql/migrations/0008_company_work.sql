-- Company work: companies of a tenant, their configured agents, tasks, and
-- runs (one task carried out by one company agent, as a job of the engine).
-- Every row carries tenant_id so every read filters by it; lists page by
-- (created_at, id), hence the composite indexes.

create table companies (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references tenants (id) on delete cascade,
  name text not null check (length(name) between 1 and 200),
  description text not null default '' check (length(description) <= 10000),
  created_by uuid references users (id) on delete set null,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create index companies_page_idx on companies (tenant_id, created_at, id);

create table company_agents (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references tenants (id) on delete cascade,
  company_id uuid not null references companies (id) on delete cascade,
  name text not null check (length(name) between 1 and 200),
  role text not null default '' check (length(role) <= 10000),
  model text not null default 'builtin/offline' check (length(model) between 3 and 200),
  status text not null default 'active' check (status in ('active', 'paused')),
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create index company_agents_page_idx on company_agents (tenant_id, company_id, created_at, id);

create table company_tasks (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references tenants (id) on delete cascade,
  company_id uuid not null references companies (id) on delete cascade,
  title text not null check (length(title) between 1 and 500),
  description text not null default '' check (length(description) <= 20000),
  status text not null default 'open' check (status in ('open', 'in_progress', 'done', 'cancelled')),
  assigned_agent_id uuid references company_agents (id) on delete set null,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create index company_tasks_page_idx on company_tasks (tenant_id, company_id, created_at, id);

-- A run is written with its job in one transaction; the job id keys the
-- worker's single write of the output.
create table company_runs (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references tenants (id) on delete cascade,
  company_id uuid not null references companies (id) on delete cascade,
  task_id uuid not null references company_tasks (id) on delete cascade,
  agent_id uuid references company_agents (id) on delete set null,
  job_id uuid unique references jobs (id) on delete set null,
  status text not null default 'queued'
    check (status in ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
  model text,
  output text,
  created_at timestamptz not null default now(),
  finished_at timestamptz
);
create index company_runs_page_idx on company_runs (tenant_id, company_id, created_at, id);
create index company_runs_task_page_idx on company_runs (tenant_id, company_id, task_id, created_at, id);

-- The run's status mirrors its job: every job state change (worker, cancel,
-- dead-worker sweep) reaches the run in the same transaction.
create function company_runs_mirror_job() returns trigger language plpgsql as $$
begin
  update company_runs
  set status = new.status,
      finished_at = new.finished_at
  where job_id = new.id and status is distinct from new.status;
  return null;
end;
$$;
create trigger jobs_company_runs_mirror after update of status on jobs
  for each row when (new.kind = 'company.run' and new.status is distinct from old.status)
  execute function company_runs_mirror_job();
