-- Who saved, deleted or read (resolved) which provider key, never the key.
create table provider_key_audit (
  id bigint generated always as identity primary key,
  tenant_id uuid not null references tenants (id) on delete cascade,
  provider text not null,
  action text not null check (action in ('saved', 'deleted', 'resolved')),
  user_id uuid references users (id) on delete set null,
  request_id text,
  created_at timestamptz not null default now()
);
create index provider_key_audit_tenant_idx on provider_key_audit (tenant_id, created_at desc);

-- HMAC signatures already accepted, so a replay within the window is refused
-- by every replica alike.
create table hmac_seen_signatures (
  tenant_id uuid not null references tenants (id) on delete cascade,
  signature text not null,
  expires_at timestamptz not null,
  primary key (tenant_id, signature)
);
create index hmac_seen_signatures_expires_idx on hmac_seen_signatures (expires_at);
