-- An invitation link proves a mailbox only when nobody but its owner saw it.
-- With SMTP configured the link goes only to the invitee's mailbox; without
-- it the Admin is shown the link to pass on, and an account made from such a
-- link has an e-mail nobody proved: it is never linked to an external login
-- by e-mail (core/external-login/accounts.ts) until its owner proves the
-- mailbox (accepting, signed in, an invitation that went only to it).

-- Whether the account's owner proved its e-mail. Accounts from the operator's
-- commands (the operator vouches) and from external logins (the provider
-- verified the e-mail) are; only an invitation link an Admin saw makes one
-- that is not.
alter table users add column email_verified boolean not null default true;

-- Whether the invitation's current link was shown to the Admin (no SMTP);
-- false when it went only to the invitee's mailbox. Every invitation before
-- this migration showed its link.
alter table tenant_invitations add column link_shown boolean not null default true;

-- Accounts made from those links so far: the account was created in the
-- transaction that accepted the invitation (its created_at is the
-- acceptance's now()). Those that also signed in through a provider since
-- keep that identity; the others are unproven.
update users u set email_verified = false
where u.password_hash is not null
  and exists (select 1 from tenant_invitations i where i.accepted_by = u.id and i.accepted_at = u.created_at)
  and not exists (select 1 from user_identities x where x.user_id = u.id and x.provider <> 'password');

-- An Admin re-sends an invitation's e-mail (a new link; the old one stops working).
alter table tenant_member_audit drop constraint tenant_member_audit_action_check;
alter table tenant_member_audit add constraint tenant_member_audit_action_check check (action in (
  'invitation_created', 'invitation_revoked', 'invitation_accepted', 'invitation_resent',
  'role_changed', 'member_removed', 'member_left', 'owner_transferred'));
