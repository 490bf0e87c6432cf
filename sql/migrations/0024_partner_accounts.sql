-- Connected partner accounts: a person lets the tenant's agents use their
-- account at the partner provider (calendar, mail, ...). The connect flows
-- (state hashed, PKCE verifier sealed, bound to the starting browser), the
-- accounts with their tokens sealed (AES-256-GCM, associated data = the
-- account id), the services each grant covers, and the tokens waiting to be
-- revoked at the provider after an account is removed.

create table partner_connect_flows (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references tenants (id) on delete cascade,
  user_id uuid not null references users (id) on delete cascade,
  state_hash text not null unique,
  -- SHA-256 of the cookie set by the start: only that browser can finish the flow.
  browser_hash text not null,
  -- Cleared when the flow ends.
  code_verifier_sealed text,
  services text[] not null,
  status text not null default 'pending' check (status in ('pending', 'completed', 'failed')),
  reason text,
  account_id uuid,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null,
  finished_at timestamptz
);
create index partner_connect_flows_expires_idx on partner_connect_flows (expires_at);

create table partner_accounts (
  id uuid primary key,
  tenant_id uuid not null references tenants (id) on delete cascade,
  user_id uuid not null references users (id) on delete cascade,
  -- The person's subject at the provider (the ID token's sub).
  subject text not null,
  email text,
  -- 'connected' (active or inactive per its services), 'needs_reauth' (the
  -- provider refused the refresh token), 'revoked' (removed; not listed).
  state text not null default 'connected' check (state in ('connected', 'needs_reauth', 'revoked')),
  access_token_sealed text,
  refresh_token_sealed text,
  access_expires_at timestamptz,
  granted_scopes text[] not null default '{}',
  connected_at timestamptz not null default now(),
  last_used_at timestamptz,
  updated_at timestamptz not null default now(),
  revoked_at timestamptz,
  check (state <> 'revoked' or (access_token_sealed is null and refresh_token_sealed is null))
);
-- One live account per person and provider subject in a tenant: a second grant adds to it.
create unique index partner_accounts_subject_idx on partner_accounts (tenant_id, user_id, subject) where state <> 'revoked';
create index partner_accounts_user_idx on partner_accounts (user_id);

create table partner_account_services (
  account_id uuid not null references partner_accounts (id) on delete cascade,
  tenant_id uuid not null references tenants (id) on delete cascade,
  service_id text not null,
  scopes text[] not null,
  -- The tenant's agents use this account for this service.
  active boolean not null default false,
  primary key (account_id, service_id)
);
-- The rule: at most one active account per service per tenant (activation moves it).
create unique index partner_account_services_one_active_idx on partner_account_services (tenant_id, service_id) where active;

-- Tokens of removed accounts until the provider has revoked them (RFC 7009).
-- A row of its own, not the account's: the account loses its tokens at once,
-- the revocation job still has them. No foreign key: a tenant deleted in the
-- meantime must not cancel the revocation. Sealed under the account's
-- associated data; each token is cleared once revoked, the row deleted when
-- both are.
create table partner_token_revocations (
  account_id uuid primary key,
  tenant_id uuid not null,
  access_token_sealed text,
  refresh_token_sealed text,
  attempts int not null default 0,
  last_error text,
  created_at timestamptz not null default now()
);
