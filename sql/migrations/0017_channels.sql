-- Messaging channels (telegram, slack, webhook): one row per tenant and
-- channel, the inbound updates stored once by the channel's own id, and the
-- outbound replies keyed by what they answer (a turn, or a refused update).

create table channel_links (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references tenants (id) on delete cascade,
  channel text not null check (channel ~ '^[a-z][a-z0-9-]{1,31}$'),
  state text not null default 'not_linked'
    check (state in ('not_linked', 'linking', 'linked', 'enabled', 'disabled', 'error')),
  -- The unguessable id in the inbound URL; null when disconnected (inbound refused).
  inbound_id uuid unique,
  -- Settings that are not secret (bot username, callback URL, client id).
  config jsonb not null default '{}'::jsonb,
  -- name -> {k: key id, c: AES-256-GCM ciphertext, l: last four}; never returned.
  secrets jsonb not null default '{}'::jsonb,
  -- The pending link: only a hash of the code/session token is kept.
  link_code_hash text,
  link_expires_at timestamptz,
  link_job_id uuid references jobs (id) on delete set null deferrable initially deferred,
  -- True once the link job registered the channel and waits for the binding.
  link_awaiting boolean not null default false,
  link_prev_state text,
  -- The binding: the chat/conversation/workspace the channel talks to.
  bound_ref text,
  account jsonb,
  session_id uuid references chat_sessions (id) on delete set null,
  linked_by uuid references users (id) on delete set null,
  linked_at timestamptz,
  inbound_count bigint not null default 0,
  outbound_count bigint not null default 0,
  last_inbound_at timestamptz,
  last_outbound_at timestamptz,
  last_error text,
  last_error_at timestamptz,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (tenant_id, channel)
);
create index channel_links_tenant_page_idx on channel_links (tenant_id, created_at, id);
create index channel_links_session_idx on channel_links (session_id);

-- link/wait waiters are woken by this NOTIFY (through the api's one LISTEN connection).
create function channel_links_notify() returns trigger language plpgsql as $$
begin
  perform pg_notify('channel_link_events', json_build_object(
    'tenantId', new.tenant_id, 'channel', new.channel, 'state', new.state)::text);
  return null;
end;
$$;
-- Only state changes wake waiters (counters change on every message).
create trigger channel_links_notify_insert after insert on channel_links
  for each row execute function channel_links_notify();
create trigger channel_links_notify_update after update on channel_links
  for each row when (old.state is distinct from new.state) execute function channel_links_notify();

create table channel_updates (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references tenants (id) on delete cascade,
  link_id uuid not null references channel_links (id) on delete cascade,
  external_id text not null,
  -- turn: became a chat turn; refused: answered with the quota reason;
  -- stored: kept, not answered (not enabled); ignored: not for us; bound: the link message.
  status text not null check (status in ('turn', 'refused', 'stored', 'ignored', 'bound')),
  chat_ref text,
  text text,
  payload jsonb not null,
  message_id uuid references chat_messages (id) on delete set null,
  turn_job_id uuid references jobs (id) on delete set null deferrable initially deferred,
  created_at timestamptz not null default now(),
  unique (link_id, external_id)
);
create index channel_updates_message_idx on channel_updates (message_id) where message_id is not null;
create index channel_updates_tenant_page_idx on channel_updates (tenant_id, created_at desc, id desc);

create table channel_deliveries (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references tenants (id) on delete cascade,
  link_id uuid not null references channel_links (id) on delete cascade,
  -- 'turn:<chat.turn job id>' or 'refusal:<update id>': sent once per key.
  key text not null unique,
  chat_ref text not null,
  text text not null,
  status text not null default 'queued' check (status in ('queued', 'sent', 'failed')),
  job_id uuid references jobs (id) on delete set null deferrable initially deferred,
  provider_message_id text,
  error text,
  created_at timestamptz not null default now(),
  sent_at timestamptz
);
create index channel_deliveries_link_idx on channel_deliveries (link_id, created_at);
create index channel_links_code_idx on channel_links (link_code_hash) where link_code_hash is not null;
