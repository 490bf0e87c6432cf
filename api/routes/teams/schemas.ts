// Schemas of the team routes (members, invitations, audit) and their row mapping.
import { z } from 'zod';
import { PASSWORD_MAX_LENGTH, PASSWORD_MIN_LENGTH } from '../../../core/crypto/passwords.ts';
import { AUDIT_ACTIONS, type AuditRow } from '../../../core/teams/audit.ts';
import type { InvitationRow } from '../../../core/teams/invitations.ts';
import type { MemberRow } from '../../../core/teams/members.ts';
import { nameSchema } from '../../../core/names.ts';
import { TenantRoleSchema } from '../../../core/tenants/roles.ts';
import { Email, Session } from '../auth/schemas.ts';

export const Member = z
  .object({
    userId: z.uuid(),
    email: z.string(),
    name: z.string().nullable(),
    role: TenantRoleSchema,
    owner: z.boolean().describe('The account the workspace counts for; stays an Admin and a member'),
    you: z.boolean().describe('Whether this is the caller'),
    joinedAt: z.iso.datetime(),
  })
  .meta({ id: 'TenantMember' });
export const MemberPage = z
  .object({ items: z.array(Member), nextCursor: z.string().nullable() })
  .meta({ id: 'TenantMemberPage' });

export const Invitation = z
  .object({
    id: z.uuid(),
    email: z.string(),
    role: TenantRoleSchema,
    invitedBy: z.string().nullable().describe("The inviting Admin's e-mail"),
    createdAt: z.iso.datetime(),
    expiresAt: z.iso.datetime(),
    expired: z.boolean(),
    emailStatus: z
      .enum(['queued', 'sent', 'failed', 'cancelled', 'not_sent'])
      .describe('not_sent: no SMTP server is configured; the Admin passes the link on'),
  })
  .meta({ id: 'TenantInvitation' });
export const InvitationPage = z
  .object({ items: z.array(Invitation), nextCursor: z.string().nullable() })
  .meta({ id: 'TenantInvitationPage' });

export const CreatedInvitation = Invitation.extend({
  link: z
    .string()
    .nullable()
    .describe(
      'Without SMTP: the one-time link to pass on, shown only in this answer (the token is kept hashed). ' +
        "With SMTP: null, the link goes only to the invitee's mailbox",
    ),
  emailed: z
    .boolean()
    .describe('Whether the platform e-mails the link (SMTP configured); then only the mailbox gets it'),
  message: z.string().describe('What happened to the link, and to whom it went'),
}).meta({ id: 'CreatedTenantInvitation' });

export const ResentInvitation = Invitation.extend({
  message: z.string().describe('To whom the new link went'),
}).meta({ id: 'ResentTenantInvitation' });

export const InviteBody = z.object({
  email: Email,
  role: TenantRoleSchema.default('member').describe('admin, member (the default) or viewer'),
});

export const RoleBody = z.object({ role: TenantRoleSchema });
export const OwnerBody = z.object({ userId: z.uuid().describe('The Admin who becomes the owner') });

export const AuditEntry = z
  .object({
    id: z.uuid(),
    action: z.enum(AUDIT_ACTIONS),
    actor: z
      .object({ userId: z.uuid().nullable(), email: z.string().nullable() })
      .describe('Who did it (null id: the account was deleted since)'),
    subject: z
      .object({ userId: z.uuid().nullable(), email: z.string().nullable() })
      .describe('Whom (or which address) it was done to'),
    invitationId: z.uuid().nullable(),
    fromRole: TenantRoleSchema.nullable(),
    toRole: TenantRoleSchema.nullable(),
    at: z.iso.datetime(),
  })
  .meta({ id: 'TenantMemberAuditEntry' });
export const AuditPage = z
  .object({ items: z.array(AuditEntry), nextCursor: z.string().nullable() })
  .meta({ id: 'TenantMemberAuditPage' });

export const AcceptBody = z
  .object({
    token: z.string().min(1).max(200).describe('The part of the invitation link after `#`'),
    name: nameSchema()
      .optional()
      .describe(
        'Without a platform token: the name of the account made for the invited address (one line, no control characters)',
      ),
    password: z
      .string()
      .min(PASSWORD_MIN_LENGTH)
      .max(PASSWORD_MAX_LENGTH)
      .optional()
      .describe(`Without a platform token: its password (${PASSWORD_MIN_LENGTH}-${PASSWORD_MAX_LENGTH} characters)`),
  })
  .meta({ id: 'AcceptInvitationRequest' });

export const Accepted = z
  .object({
    tenantId: z.uuid().describe('Send it as x-tenant-id to act in the workspace'),
    tenantName: z.string(),
    role: TenantRoleSchema,
    session: Session.nullable().describe(
      'For a new account: its first login (token and refresh token); null when a signed-in person accepted',
    ),
  })
  .meta({ id: 'AcceptedInvitation' });

const iso = (value: string) => new Date(value).toISOString();

export const toMember = (row: MemberRow, callerId: string) => ({
  userId: row.id,
  email: row.email,
  name: row.display_name,
  role: row.role,
  owner: row.owner,
  you: row.id === callerId,
  joinedAt: iso(row.created_at),
});

export const toInvitation = (row: InvitationRow) => ({
  id: row.id,
  email: row.email,
  role: row.role,
  invitedBy: row.invited_by_email,
  createdAt: iso(row.created_at),
  expiresAt: iso(row.expires_at),
  expired: new Date(row.expires_at).getTime() <= Date.now(),
  emailStatus: (row.email_status ?? 'not_sent') as z.infer<typeof Invitation>['emailStatus'],
});

export const toAuditEntry = (row: AuditRow) => ({
  id: row.id,
  action: row.action as z.infer<typeof AuditEntry>['action'],
  actor: { userId: row.actor_id, email: row.actor_email },
  subject: { userId: row.subject_id, email: row.subject_email },
  invitationId: row.invitation_id,
  fromRole: TenantRoleSchema.nullable().parse(row.from_role),
  toRole: TenantRoleSchema.nullable().parse(row.to_role),
  at: iso(row.created_at),
});
