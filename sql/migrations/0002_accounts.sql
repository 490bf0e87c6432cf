-- Accounts: passwords, linked identities, refresh tokens, the platform
-- operator flag; tenant secrets and sessions; dashboard licenses with TOTP;
-- shared rate-limit counters; contact submissions.

alter table users
  add column password_hash text,
  add column avatar_url text,
  add column is_operator boolean not null default false,
  add column updated_at timestamptz not null default now();

-- One person, several ways in: password today, external identity providers
-- (partner, altidp) later. A provider's subject maps to exactly one user.
create table user_identities (
  id uuid primary key default gen_random_uuid(),
  user_id uuid not null references users (id) on delete cascade,
  provider text not null check (provider in ('password', 'partner', 'altidp')),
  subject text not null,
  email text,
  created_at timestamptz not null default now(),
  unique (provider, subject)
);
create index user_identities_user_idx on user_identities (user_id);

-- Refresh tokens (stored as SHA-256 of a random value), rotated on use.
create table auth_refresh_tokens (
  id uuid primary key default gen_random_uuid(),
  user_id uuid not null references users (id) on delete cascade,
  token_hash text not null unique,
  family_id uuid not null,
  expires_at timestamptz not null,
  used_at timestamptz,
  revoked_at timestamptz,
  created_at timestamptz not null default now()
);
create index auth_refresh_tokens_user_idx on auth_refresh_tokens (user_id);
create index auth_refresh_tokens_family_idx on auth_refresh_tokens (family_id);

alter table tenants
  add column plan text not null default 'free',
  add column created_by uuid references users (id) on delete set null;

-- Integration secrets: AES-256-GCM under DATA_ENCRYPTION_KEY, bound to the
-- tenant and name as associated data; never returned in plain text.
create table tenant_secrets (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references tenants (id) on delete cascade,
  name text not null check (name ~ '^[A-Za-z][A-Za-z0-9_.-]{0,99}$'),
  ciphertext text not null,
  created_by uuid references users (id) on delete set null,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (tenant_id, name)
);

-- Conversations inside a tenant (the chat area adds messages and agents).
create table chat_sessions (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references tenants (id) on delete cascade,
  title text not null default 'New session' check (length(title) between 1 and 200),
  created_by uuid references users (id) on delete set null,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create index chat_sessions_tenant_idx on chat_sessions (tenant_id, created_at desc, id desc);

-- Dashboard licenses: the key is high-entropy random, so its SHA-256 is the
-- lookup; the TOTP secret is encrypted; totp_last_step refuses replays.
create table dashboard_licenses (
  id uuid primary key default gen_random_uuid(),
  key_hash text not null unique,
  key_hint text not null,
  purchaser_email text not null,
  plan text not null default 'pro',
  features jsonb not null default '[]'::jsonb,
  status text not null default 'active' check (status in ('active', 'revoked', 'expired')),
  expires_at timestamptz,
  totp_secret text,
  totp_pending_secret text,
  totp_enabled_at timestamptz,
  totp_last_step bigint,
  created_at timestamptz not null default now()
);
create index dashboard_licenses_email_idx on dashboard_licenses (lower(purchaser_email));

create table dashboard_recovery_codes (
  id uuid primary key default gen_random_uuid(),
  license_id uuid not null references dashboard_licenses (id) on delete cascade,
  code_hash text not null,
  used_at timestamptz,
  created_at timestamptz not null default now()
);
create index dashboard_recovery_codes_license_idx on dashboard_recovery_codes (license_id);

-- Rate limits shared by every api replica: one row per (bucket, key), its
-- window starting at the first request.
create table rate_limit_windows (
  bucket text not null,
  key text not null,
  window_start timestamptz not null,
  hits integer not null,
  primary key (bucket, key)
);
create index rate_limit_windows_start_idx on rate_limit_windows (window_start);

create table contact_submissions (
  id uuid primary key default gen_random_uuid(),
  name text not null,
  email text not null,
  subject text,
  message text not null,
  status text not null default 'new' check (status in ('new', 'in_progress', 'resolved', 'spam')),
  source_ip text,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create index contact_submissions_created_idx on contact_submissions (created_at desc, id desc);
