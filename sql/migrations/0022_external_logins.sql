-- Logins through external OpenID Connect providers (partner, altidp): what
-- the provider last told us about each linked identity, the redirect flows
-- of altidp (state, nonce and PKCE kept here, never in the browser), the
-- single-use result tickets those flows end with, and altidp's signed
-- server-to-server notifications, stored once and applied by a job.

alter table user_identities
  add column email_verified boolean,
  -- altidp's e-mail relay: 'disabled' after an email-disabled notification.
  add column email_status text check (email_status in ('enabled', 'disabled')),
  add column last_login_at timestamptz,
  add column updated_at timestamptz not null default now();

create table external_login_flows (
  id uuid primary key default gen_random_uuid(),
  provider text not null check (provider in ('altidp')),
  state_hash text not null unique,
  -- SHA-256 of the browser-binding cookie: the callback must come from the browser that started.
  browser_hash text not null,
  nonce text not null,
  code_verifier_sealed text not null,
  mode text not null check (mode in ('signin', 'onboarding')),
  next_path text not null check (length(next_path) between 1 and 2048),
  created_at timestamptz not null default now(),
  expires_at timestamptz not null,
  used_at timestamptz
);
create index external_login_flows_expires_idx on external_login_flows (expires_at);

create table external_login_tickets (
  ticket_hash text primary key,
  user_id uuid not null references users (id) on delete cascade,
  provider text not null,
  mode text not null,
  new_user boolean not null,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null,
  used_at timestamptz
);
create index external_login_tickets_expires_idx on external_login_tickets (expires_at);

create table altidp_notifications (
  id uuid primary key default gen_random_uuid(),
  -- The JWS's jti, or the SHA-256 of the JWS when it has none: a redelivery stores nothing.
  dedupe_key text not null unique,
  event_type text not null,
  subject text,
  claims jsonb not null,
  status text not null default 'queued' check (status in ('queued', 'applied', 'ignored', 'failed')),
  outcome text,
  received_at timestamptz not null default now(),
  applied_at timestamptz
);
create index altidp_notifications_received_idx on altidp_notifications (received_at desc);
