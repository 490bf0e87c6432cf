-- A workspace's owner can hand it over to another Admin; the audit records it.
alter table tenant_member_audit drop constraint tenant_member_audit_action_check;
alter table tenant_member_audit add constraint tenant_member_audit_action_check check (action in (
  'invitation_created', 'invitation_revoked', 'invitation_accepted',
  'role_changed', 'member_removed', 'member_left', 'owner_transferred'));
