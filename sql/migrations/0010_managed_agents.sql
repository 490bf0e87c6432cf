-- Managed agents and the runners that execute them (issue 6 part 4): the
-- restore route hands work to a tenant's runner through runner_work, which a
-- worker task waits on until the runner acknowledges it.

create table managed_agents (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references tenants (id) on delete cascade,
  name text not null check (length(name) between 1 and 200),
  -- authority agents act for the tenant; a deleted one is a tombstone that the
  -- restore route never brings back.
  kind text not null check (kind in ('standalone', 'authority')),
  status text not null default 'active' check (status in ('active', 'deleted')),
  deleted_at timestamptz,
  -- The agent principal that created it (null: created by a person); an
  -- unclaimed trial may restore only its own standalone agents.
  created_by_principal uuid references agent_principals (id) on delete set null,
  created_at timestamptz not null default now(),
  restored_at timestamptz,
  runner_id uuid,
  check ((status = 'deleted') = (deleted_at is not null))
);
create index managed_agents_tenant_idx on managed_agents (tenant_id, created_at desc);

-- A tenant's self-hosted runner. The token is shown once at enrollment and
-- stored as SHA-256; heartbeats keep last_heartbeat_at and the runner's view
-- of its cloud gateway connection fresh.
create table runners (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references tenants (id) on delete cascade,
  name text not null check (length(name) between 1 and 200),
  token_hash text not null unique,
  enrolled_at timestamptz not null default now(),
  last_heartbeat_at timestamptz,
  gateway_connected boolean not null default false,
  status text not null default 'active' check (status in ('active', 'revoked'))
);
create index runners_tenant_idx on runners (tenant_id, last_heartbeat_at desc nulls last);

alter table managed_agents
  add constraint managed_agents_runner_fk foreign key (runner_id) references runners (id) on delete set null;

-- Work handed to a runner: pending until the runner acknowledges it on a
-- heartbeat, done once the task that waits for it finishes.
create table runner_work (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references tenants (id) on delete cascade,
  runner_id uuid not null references runners (id) on delete cascade,
  managed_agent_id uuid not null references managed_agents (id) on delete cascade,
  job_id uuid not null references jobs (id) on delete cascade,
  state text not null default 'pending' check (state in ('pending', 'acknowledged', 'done')),
  created_at timestamptz not null default now(),
  acknowledged_at timestamptz
);
create index runner_work_pending_idx on runner_work (runner_id, created_at) where state = 'pending';
create index runner_work_agent_idx on runner_work (managed_agent_id, created_at desc);

-- Per-tenant switches of agent execution, kept apart from tenants so the
-- accounts code does not need to know about them. No row: the defaults.
create table tenant_agent_settings (
  tenant_id uuid primary key references tenants (id) on delete cascade,
  run_execution_enabled boolean not null default true,
  updated_at timestamptz not null default now()
);
