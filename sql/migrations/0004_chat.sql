-- Chat turns and what they touch: agents, messages, idempotency records,
-- provider keys and credits, usage records.

-- An agent of a tenant (the chat area's "agent"; company agents come later).
create table agents (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references tenants (id) on delete cascade,
  name text not null check (length(name) between 1 and 200),
  model text not null,
  is_default boolean not null default false,
  created_at timestamptz not null default now()
);
create index agents_tenant_idx on agents (tenant_id);
create unique index agents_one_default on agents (tenant_id) where is_default;

alter table chat_sessions
  add column agent_id uuid references agents (id) on delete set null,
  add column model text;

-- Messages of a session in order (seq). An assistant message is keyed by the
-- job that wrote it, so a retried turn can never write a second one.
create table chat_messages (
  id uuid primary key default gen_random_uuid(),
  seq bigint generated always as identity,
  tenant_id uuid not null references tenants (id) on delete cascade,
  session_id uuid not null references chat_sessions (id) on delete cascade,
  role text not null check (role in ('user', 'assistant', 'system')),
  content text not null,
  attachments jsonb not null default '[]'::jsonb,
  company_scope text,
  model text,
  job_id uuid unique references jobs (id) on delete set null,
  created_by uuid references users (id) on delete set null,
  created_at timestamptz not null default now()
);
create index chat_messages_session_idx on chat_messages (session_id, seq);
-- The monthly message quota counts a tenant's user messages.
create index chat_messages_tenant_user_idx on chat_messages (tenant_id, created_at) where role = 'user';

-- Idempotency: one row per (scope, tenant, key). The fingerprint is a hash
-- of everything that makes the request the same request; the recorded
-- response is replayed for 24 hours.
create table idempotency_records (
  scope text not null,
  tenant_id uuid not null references tenants (id) on delete cascade,
  key text not null,
  fingerprint text not null,
  state text not null default 'in_progress' check (state in ('in_progress', 'completed')),
  response_status integer,
  response_body jsonb,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null default now() + interval '24 hours',
  primary key (scope, tenant_id, key)
);
create index idempotency_records_expires_idx on idempotency_records (expires_at);

-- A tenant's own provider keys: sealed with the data key whose id is
-- recorded, so the master key can be rotated; last4 for the masked list.
create table provider_keys (
  tenant_id uuid not null references tenants (id) on delete cascade,
  provider text not null,
  key_id text not null,
  ciphertext text not null,
  last4 text not null,
  base_url text,
  created_by uuid references users (id) on delete set null,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  primary key (tenant_id, provider)
);

-- Platform credits, in micro-dollars, for tenants without their own key.
create table tenant_credits (
  tenant_id uuid primary key references tenants (id) on delete cascade,
  balance_micros bigint not null default 0,
  updated_at timestamptz not null default now()
);

-- One row per model call (chat turns write theirs; clients may ingest).
create table usage_records (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references tenants (id) on delete cascade,
  agent_id uuid references agents (id) on delete set null,
  session_id uuid references chat_sessions (id) on delete set null,
  job_id uuid unique references jobs (id) on delete set null,
  provider text not null,
  model text not null,
  input_tokens integer not null check (input_tokens >= 0),
  output_tokens integer not null check (output_tokens >= 0),
  cost_micros bigint not null default 0 check (cost_micros >= 0),
  credential text not null default 'tenant_key' check (credential in ('tenant_key', 'platform_credits', 'none', 'external')),
  occurred_at timestamptz not null default now(),
  created_at timestamptz not null default now()
);
create index usage_records_tenant_time_idx on usage_records (tenant_id, occurred_at desc, id desc);

-- User messages per tenant and UTC month, kept by a trigger, so the quota
-- check on every send reads one row instead of counting the month's messages.
create table tenant_message_counts (
  tenant_id uuid not null references tenants (id) on delete cascade,
  month date not null,
  messages integer not null default 0,
  primary key (tenant_id, month)
);

create function count_user_message() returns trigger language plpgsql as $$
begin
  insert into tenant_message_counts (tenant_id, month, messages)
  values (new.tenant_id, date_trunc('month', new.created_at at time zone 'UTC')::date, 1)
  on conflict (tenant_id, month) do update set messages = tenant_message_counts.messages + 1;
  return null;
end;
$$;
create trigger chat_messages_count_user after insert on chat_messages
  for each row when (new.role = 'user') execute function count_user_message();
