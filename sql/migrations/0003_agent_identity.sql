-- The identity provider for agents: signing keys, registrations with their
-- principal and workspace, rotating refresh tokens, claim attempts.

-- Asymmetric signing keys (ES256). The private JWK is sealed with
-- DATA_ENCRYPTION_KEY. A retired key signs nothing new but stays in the JWKS
-- until every token it signed has expired.
create table idp_signing_keys (
  kid text primary key,
  alg text not null,
  private_jwk text not null,
  public_jwk jsonb not null,
  created_at timestamptz not null default now(),
  retired_at timestamptz,
  -- After this the key leaves the JWKS (retired_at + longest token lifetime).
  expires_at timestamptz
);

-- The agent principal: the identity that calls the Agent API, inside the
-- registration's workspace.
create table agent_principals (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references tenants (id) on delete cascade,
  display_name text not null,
  status text not null default 'active' check (status in ('active', 'unlinked')),
  created_at timestamptz not null default now()
);
create index agent_principals_tenant_idx on agent_principals (tenant_id);

create table agent_registrations (
  id uuid primary key default gen_random_uuid(),
  type text not null check (type in ('anonymous', 'service_auth')),
  status text not null default 'active' check (status in ('active', 'revoked')),
  -- unclaimed: anonymous, usable; pending: service_auth before its claim
  -- verifies (no usable assertion); claimed: bound to a person.
  claim_state text not null check (claim_state in ('unclaimed', 'pending', 'claimed')),
  tenant_id uuid not null references tenants (id) on delete cascade,
  principal_id uuid not null references agent_principals (id) on delete cascade,
  login_hint text,
  claim_token_hash text unique,
  claim_expires_at timestamptz,
  claim_revoked_at timestamptz,
  claimed_by uuid references users (id) on delete set null,
  claimed_at timestamptz,
  -- The organization (one of the claiming person's tenants) chosen on the
  -- claim page when the person belongs to several.
  organization_id uuid references tenants (id) on delete set null,
  created_ip text,
  created_at timestamptz not null default now(),
  revoked_at timestamptz
);
create index agent_registrations_tenant_idx on agent_registrations (tenant_id);

-- Refresh tokens of a registration, stored as SHA-256. Exactly one is
-- 'active'; presenting a 'rotated' one revokes the active one (reuse).
create table agent_refresh_tokens (
  id uuid primary key default gen_random_uuid(),
  registration_id uuid not null references agent_registrations (id) on delete cascade,
  token_hash text not null unique,
  status text not null default 'active' check (status in ('active', 'rotated', 'revoked')),
  created_at timestamptz not null default now(),
  rotated_at timestamptz
);
create index agent_refresh_tokens_registration_idx on agent_refresh_tokens (registration_id);
create unique index agent_refresh_tokens_one_active on agent_refresh_tokens (registration_id) where status = 'active';

-- One claim attempt per POST /agent/identity/claim: the person opens its
-- verification page, signs in, confirms (or denies) and is shown the user
-- code, which the agent then presents with its claim token.
create table agent_claim_attempts (
  id uuid primary key default gen_random_uuid(),
  registration_id uuid not null references agent_registrations (id) on delete cascade,
  status text not null default 'open' check (status in ('open', 'confirmed', 'denied', 'completed', 'locked')),
  login_hint text,
  user_code_hash text,
  user_code_expires_at timestamptz,
  failed_codes integer not null default 0,
  confirmed_by uuid references users (id) on delete set null,
  organization_id uuid references tenants (id) on delete set null,
  -- Set when an organization was picked, so a picked one that was deleted
  -- since (organization_id nulled) reads as stale, not as never picked.
  organization_picked_at timestamptz,
  expires_at timestamptz not null,
  created_at timestamptz not null default now(),
  confirmed_at timestamptz,
  completed_at timestamptz
);
create index agent_claim_attempts_registration_idx on agent_claim_attempts (registration_id, created_at desc);
create index agent_claim_attempts_expires_idx on agent_claim_attempts (expires_at);

-- Api replicas cache what the Agent API checks on every request (is the
-- registration live, is the principal linked, which plan). Any change that
-- could alter that tells every replica to forget the registration.
create function agent_auth_notify() returns trigger language plpgsql as $$
declare
  rec record;
begin
  if tg_table_name = 'agent_registrations' then
    perform pg_notify('agent_auth_events', coalesce(new.id, old.id)::text);
  elsif tg_table_name = 'agent_principals' then
    for rec in select id from agent_registrations where principal_id = coalesce(new.id, old.id) loop
      perform pg_notify('agent_auth_events', rec.id::text);
    end loop;
  elsif tg_table_name = 'tenants' then
    for rec in select id from agent_registrations where tenant_id = coalesce(new.id, old.id) loop
      perform pg_notify('agent_auth_events', rec.id::text);
    end loop;
  end if;
  return null;
end;
$$;
create trigger agent_registrations_auth_notify after update or delete on agent_registrations
  for each row execute function agent_auth_notify();
create trigger agent_principals_auth_notify after update or delete on agent_principals
  for each row execute function agent_auth_notify();
create trigger tenants_auth_notify after update of plan, name or delete on tenants
  for each row execute function agent_auth_notify();
