-- Teams: a workspace's Admins invite people by e-mail with a role (admin,
-- member, viewer), change roles and remove members; every change is
-- audited. An invitation's token is kept only as its SHA-256; the e-mail
-- that carries it (when SMTP is configured) waits in invitation_emails with
-- the link sealed under DATA_ENCRYPTION_KEY, and loses it once sent.

alter table tenant_memberships drop constraint tenant_memberships_role_check;
alter table tenant_memberships add constraint tenant_memberships_role_check check (role in ('admin', 'member', 'viewer'));

create table tenant_invitations (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references tenants (id) on delete cascade,
  email text not null check (length(email) between 3 and 320),
  role text not null check (role in ('admin', 'member', 'viewer')),
  token_hash bytea not null unique,
  invited_by uuid references users (id) on delete set null,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null,
  accepted_at timestamptz,
  accepted_by uuid references users (id) on delete set null,
  revoked_at timestamptz,
  check (accepted_at is null or revoked_at is null)
);
-- Open invitations of a workspace, and one open invitation per address.
create index tenant_invitations_open on tenant_invitations (tenant_id, created_at desc) where accepted_at is null and revoked_at is null;
create unique index tenant_invitations_open_email on tenant_invitations (tenant_id, lower(email)) where accepted_at is null and revoked_at is null;
-- The day's invitations of a workspace (the daily bound counts them all).
create index tenant_invitations_created on tenant_invitations (tenant_id, created_at);

-- The outbox of invitation e-mails: one row per e-mail, sent by the
-- team.invitation_email job; the sealed link is cleared once sent or given up.
create table invitation_emails (
  id uuid primary key default gen_random_uuid(),
  invitation_id uuid not null references tenant_invitations (id) on delete cascade,
  sealed_link text,
  status text not null default 'queued' check (status in ('queued', 'sent', 'failed', 'cancelled')),
  attempts integer not null default 0,
  last_error text,
  created_at timestamptz not null default now(),
  sent_at timestamptz
);
create index invitation_emails_invitation on invitation_emails (invitation_id);

-- Who changed which membership, when, and from which role to which. The
-- e-mails are kept as they were, so the record reads the same after an
-- account is deleted.
create table tenant_member_audit (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references tenants (id) on delete cascade,
  action text not null check (action in (
    'invitation_created', 'invitation_revoked', 'invitation_accepted',
    'role_changed', 'member_removed', 'member_left')),
  actor_id uuid references users (id) on delete set null,
  actor_email text,
  subject_id uuid references users (id) on delete set null,
  subject_email text,
  invitation_id uuid references tenant_invitations (id) on delete set null,
  from_role text,
  to_role text,
  request_id text,
  created_at timestamptz not null default now()
);
create index tenant_member_audit_tenant on tenant_member_audit (tenant_id, created_at desc, id desc);
