-- Usage: daily rollups of usage_records, the queue that keeps them exact,
-- tenant budgets and their snapshots, runs of a tenant's external cron jobs.
-- Days are UTC days everywhere.

create function usage_day(ts timestamptz) returns date
  language sql immutable parallel safe
  as $$ select ($1 at time zone 'UTC')::date $$;

-- One row per (tenant, UTC day, model, agent, provider), recomputed from
-- usage_records as a whole day, never incremented, so re-running or retrying
-- a rollup can never count a record twice. No agent (or a record without
-- one) is the nil uuid so the key can hold it; no foreign key to agents, so
-- history outlives a deleted agent.
create table usage_daily (
  tenant_id uuid not null references tenants (id) on delete cascade,
  day date not null,
  model text not null,
  agent_key uuid not null default '00000000-0000-0000-0000-000000000000',
  provider text not null,
  input_tokens bigint not null check (input_tokens >= 0),
  output_tokens bigint not null check (output_tokens >= 0),
  cost_micros bigint not null check (cost_micros >= 0),
  records integer not null check (records > 0),
  computed_at timestamptz not null default now(),
  primary key (tenant_id, day, model, agent_key, provider)
);
create index usage_daily_day_idx on usage_daily (day);

-- Days whose usage_daily rows may be stale: every insert into usage_records
-- queues its (tenant, day) in the same transaction. Readers take queued days
-- from the raw records; the rollup recomputes them and deletes exactly the
-- queue rows it saw, so a record committed during a rollup stays queued.
create table usage_rollup_queue (
  id bigint generated always as identity primary key,
  tenant_id uuid not null references tenants (id) on delete cascade,
  day date not null,
  queued_at timestamptz not null default now()
);
create index usage_rollup_queue_tenant_day_idx on usage_rollup_queue (tenant_id, day);
create index usage_rollup_queue_day_idx on usage_rollup_queue (day);

-- Per statement, so a bulk insert queues each (tenant, day) once; an append
-- only, so concurrent chat turns never wait on each other here.
create function usage_records_queue_rollup() returns trigger language plpgsql as $$
begin
  insert into usage_rollup_queue (tenant_id, day)
    select distinct tenant_id, usage_day(occurred_at) from new_rows;
  return null;
end;
$$;
create trigger usage_records_queue_rollup after insert on usage_records
  referencing new table as new_rows
  for each statement execute function usage_records_queue_rollup();

-- A full-day recompute reads one day of every tenant.
create index usage_records_occurred_idx on usage_records (occurred_at);

-- Records written before this migration are queued once.
insert into usage_rollup_queue (tenant_id, day)
  select distinct tenant_id, usage_day(occurred_at) from usage_records;

-- Ingested records may carry a client key: a retried ingest is answered
-- with the record it already wrote.
alter table usage_records add column ingest_key text check (length(ingest_key) between 1 and 200);
create unique index usage_records_ingest_key on usage_records (tenant_id, ingest_key) where ingest_key is not null;

-- The monthly message quota counts a tenant's user messages of this month
-- (0004 may already have made this index under the same name).
create index if not exists chat_messages_tenant_user_idx on chat_messages (tenant_id, created_at) where role = 'user';

-- A tenant's own monthly spending limit; without a row the plan's default applies.
create table tenant_budgets (
  tenant_id uuid primary key references tenants (id) on delete cascade,
  monthly_limit_micros bigint not null check (monthly_limit_micros between 0 and 1000000000000000),
  updated_by uuid references users (id) on delete set null,
  updated_at timestamptz not null default now()
);

-- Point-in-time copies of a tenant's budget, taken on request.
create table budget_snapshots (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references tenants (id) on delete cascade,
  taken_at timestamptz not null default now(),
  period_start date not null,
  limit_micros bigint not null,
  used_micros bigint not null,
  remaining_micros bigint not null,
  limit_source text not null check (limit_source in ('tenant', 'plan')),
  created_by uuid references users (id) on delete set null
);
create index budget_snapshots_tenant_idx on budget_snapshots (tenant_id, taken_at desc);
create index budget_snapshots_taken_idx on budget_snapshots (taken_at);

-- Runs of a tenant's own scheduled jobs, reported by the tenant (POST /api/usage/cron-runs).
create table external_cron_runs (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references tenants (id) on delete cascade,
  name text not null check (length(name) between 1 and 200),
  status text not null check (status in ('running', 'succeeded', 'failed', 'skipped')),
  started_at timestamptz not null,
  finished_at timestamptz check (finished_at >= started_at),
  duration_ms bigint check (duration_ms >= 0),
  detail jsonb not null default '{}'::jsonb,
  created_by uuid references users (id) on delete set null,
  created_at timestamptz not null default now()
);
create index external_cron_runs_tenant_idx on external_cron_runs (tenant_id, created_at desc, id desc);
create index external_cron_runs_created_idx on external_cron_runs (created_at);
