-- Insight boards (issue 6 part 2): saved boards with versioned content, their
-- hosted publication, hosted-link secrets (stored only as SHA-256) and the
-- human approvals a public publication needs.

create table insight_boards (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references tenants (id) on delete cascade,
  scope_type text not null check (scope_type in ('company', 'agent')),
  scope_id text not null check (char_length(scope_id) between 1 and 128),
  title text not null check (char_length(title) between 1 and 200),
  created_by_principal uuid references agent_principals (id) on delete set null,
  created_by_user uuid references users (id) on delete set null,
  -- The integer list cursor of the Agent API: pages are "position > cursor".
  position bigint generated always as identity unique,
  latest_version int not null default 0,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create index insight_boards_tenant_position_idx on insight_boards (tenant_id, position);
create index insight_boards_tenant_scope_idx on insight_boards (tenant_id, scope_type, scope_id, position);

-- Saved content; a version is immutable once written.
create table board_versions (
  board_id uuid not null references insight_boards (id) on delete cascade,
  version int not null check (version >= 1),
  content jsonb not null,
  created_at timestamptz not null default now(),
  primary key (board_id, version)
);

create table board_publications (
  board_id uuid primary key references insight_boards (id) on delete cascade,
  tenant_id uuid not null references tenants (id) on delete cascade,
  state text not null check (state in ('unpublished', 'published')),
  version int,
  visibility text check (visibility in ('private', 'public')),
  published_at timestamptz,
  unpublished_at timestamptz
);

-- Hosted-link secrets: only the hash is kept; a board has at most one active link.
create table board_links (
  id uuid primary key default gen_random_uuid(),
  board_id uuid not null references insight_boards (id) on delete cascade,
  secret_hash text not null unique,
  created_at timestamptz not null default now(),
  revoked_at timestamptz
);
create unique index board_links_one_active_idx on board_links (board_id) where revoked_at is null;

-- A person's decision on one exact publish request (its fingerprint).
create table board_publish_approvals (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references tenants (id) on delete cascade,
  board_id uuid not null references insight_boards (id) on delete cascade,
  request_fingerprint text not null,
  version int not null,
  visibility text not null check (visibility in ('private', 'public')),
  requested_by_principal uuid references agent_principals (id) on delete set null,
  state text not null default 'pending' check (state in ('pending', 'approved', 'denied', 'consumed')),
  decided_by uuid references users (id) on delete set null,
  created_at timestamptz not null default now(),
  decided_at timestamptz
);
create index board_publish_approvals_lookup_idx on board_publish_approvals (board_id, request_fingerprint, created_at desc);
create index board_publish_approvals_tenant_idx on board_publish_approvals (tenant_id, state);
