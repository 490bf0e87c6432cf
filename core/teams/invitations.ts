// Invitations: an Admin invites an e-mail address with a role; a one-time
// link is made whose token is kept here only as its SHA-256. With SMTP
// configured the link goes only to the invitee's mailbox (accepting it then
// proves the mailbox); without, the answer shows it to the Admin.
// The link puts the token in the URL's fragment, which browsers never send
// to a server, so it reaches no access log or Referer. An invitation is
// open until it is accepted, revoked or expires; a new one for the same
// address replaces the open one (the old link stops working). When SMTP is
// configured, the e-mail goes out from a job (invitation_emails is its
// outbox; the link waits there sealed, and is cleared once sent). Reading a
// token and accepting it are in invitation-acceptance.ts, re-sending in
// invitation-resend.ts.
import { createHash } from 'node:crypto';
import { z } from 'zod';
import type { Keyring } from '../crypto/keyring.ts';
import { randomToken } from '../crypto/tokens.ts';
import { sql, type CommonQueryMethods } from '../db/pool.ts';
import { enqueueJobs } from '../jobs/enqueue.ts';
import type { Position } from '../paging.ts';
import { TenantRoleSchema, type TenantRole } from '../tenants/roles.ts';
import { recordAudit } from './audit.ts';
import { lockTenant, type Actor } from './members.ts';
import type { TeamSettings } from './settings.ts';

export const INVITATION_EMAIL_JOB = 'team.invitation_email';
export const TOKEN_PREFIX = 'inv_';

export const tokenHash = (token: string) => createHash('sha256').update(token, 'utf8').digest();

/** The page that accepts an invitation; the token rides in the fragment. */
export const invitationLink = (baseUrl: string, token: string) => `${baseUrl}/invitations/accept#${token}`;

/** Why an invitation cannot be made or used: status and code for the answer. */
export class InvitationError extends Error {
  override name = 'InvitationError';
  constructor(
    public readonly status: 403 | 404 | 409 | 410 | 429,
    public readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

export const InvitationRow = z.object({
  id: z.string(),
  tenant_id: z.string(),
  email: z.string(),
  role: TenantRoleSchema,
  invited_by_email: z.string().nullable(),
  created_at: z.string(),
  expires_at: z.string(),
  email_status: z.string().nullable(),
  cursor_t: z.string(),
});
export type InvitationRow = z.infer<typeof InvitationRow>;

export const invitationColumns = sql.fragment`
  i.id, i.tenant_id, i.email, i.role, (select email from users where id = i.invited_by) as invited_by_email,
  i.created_at, i.expires_at, (select status from invitation_emails e where e.invitation_id = i.id order by e.created_at desc limit 1) as email_status,
  i.created_at::text as cursor_t`;

/** link: null when it went only to the invitee's mailbox (SMTP configured). */
export type CreatedInvitation = { invitation: InvitationRow; link: string | null; emailed: boolean };

/** E-mails re-sent by the workspace in the last 24 hours: INVITATIONS_PER_DAY counts them with its invitations. */
export const resentToday = (tenantId: string) => sql.fragment`(
  select count(*) from tenant_member_audit a
  where a.tenant_id = ${tenantId} and a.action = 'invitation_resent' and a.created_at > now() - interval '1 day')`;

/** Refuses an invitation to a member, or one past the workspace's daily or open-invitation bound. */
async function refuseBeyondBounds(
  tx: CommonQueryMethods,
  tenantId: string,
  email: string,
  settings: TeamSettings,
): Promise<void> {
  const member = await tx.exists(sql.unsafe`
    select 1 from tenant_memberships m join users u on u.id = m.user_id where m.tenant_id = ${tenantId} and u.email_key = canonical_email(${email})`);
  if (member)
    throw new InvitationError(
      409,
      'already_member',
      `${email} is already a member of this workspace; change their role instead.`,
    );
  const counts = await tx.one(sql.type(z.object({ today: z.number(), open: z.number(), retry_s: z.number() }))`
    select (count(*) filter (where created_at > now() - interval '1 day') + ${resentToday(tenantId)})::int as today,
      count(*) filter (where accepted_at is null and revoked_at is null and expires_at > now() and canonical_email(email) is distinct from canonical_email(${email}))::int as open,
      coalesce(ceil(extract(epoch from min(created_at) filter (where created_at > now() - interval '1 day') + interval '1 day' - now())), 0)::int as retry_s
    from tenant_invitations where tenant_id = ${tenantId} and created_at > now() - greatest(interval '1 day', make_interval(hours => ${settings.invitationTtlHours}))`);
  if (counts.today >= settings.invitationsPerDay) {
    throw new InvitationError(
      429,
      'invitation_limit',
      `This workspace sent ${counts.today} invitations in the last 24 hours, the most allowed (INVITATIONS_PER_DAY); try again in ${Math.max(1, Math.ceil(counts.retry_s / 60))} minutes.`,
    );
  }
  if (counts.open >= settings.pendingInvitations) {
    throw new InvitationError(
      409,
      'too_many_pending_invitations',
      `This workspace has ${counts.open} open invitations, the most allowed (INVITATIONS_PENDING_MAX); revoke some first.`,
    );
  }
}

/** Revokes the open invitation for the same address (its queued e-mail cancelled), audited. */
async function replaceOpenInvitation(
  tx: CommonQueryMethods,
  tenantId: string,
  actor: Actor,
  email: string,
): Promise<void> {
  const replaced = await tx.anyFirst(sql.type(z.object({ id: z.string() }))`
    update tenant_invitations set revoked_at = now()
    where tenant_id = ${tenantId} and canonical_email(email) = canonical_email(${email}) and accepted_at is null and revoked_at is null
    returning id`);
  for (const id of replaced) {
    await tx.query(
      sql.unsafe`update invitation_emails set status = 'cancelled', sealed_link = null where invitation_id = ${id} and status = 'queued'`,
    );
    await recordAudit(tx, {
      tenantId,
      action: 'invitation_revoked',
      actorId: actor.userId,
      subjectEmail: email,
      invitationId: id,
      requestId: actor.requestId,
    });
  }
}

/** Puts the link's e-mail in the outbox, sealed, with the job that sends it. */
export async function queueInvitationEmail(
  tx: CommonQueryMethods,
  input: { tenantId: string; invitationId: string; link: string; keyring: Keyring },
): Promise<void> {
  const { tenantId, invitationId, link } = input;
  const outbox = await tx.oneFirst(sql.type(z.object({ id: z.string() }))`
    insert into invitation_emails (invitation_id, sealed_link)
    values (${invitationId}, ${input.keyring.sealPacked(link, `invitation-email:${invitationId}`)}) returning id`);
  await enqueueJobs(tx, [{ kind: INVITATION_EMAIL_JOB, tenantId, input: { emailId: outbox }, maxAttempts: 8 }]);
}

/**
 * Creates an invitation (replacing an open one for the same address) under
 * the workspace's bounds, audited; with SMTP configured, its e-mail job too.
 */
export async function createInvitation(
  db: CommonQueryMethods,
  input: {
    tenantId: string;
    actor: Actor;
    email: string;
    role: TenantRole;
    settings: TeamSettings;
    baseUrl: string;
    keyring: Keyring;
  },
): Promise<CreatedInvitation> {
  const { tenantId, actor, settings } = input;
  const email = input.email.trim();
  const token = randomToken(TOKEN_PREFIX);
  const link = invitationLink(input.baseUrl, token);
  return db.transaction(async (tx) => {
    // One workspace's invitations one at a time: the bounds hold under concurrency.
    await lockTenant(tx, tenantId);
    await refuseBeyondBounds(tx, tenantId, email, settings);
    await replaceOpenInvitation(tx, tenantId, actor, email);
    const id = await tx.oneFirst(sql.type(z.object({ id: z.string() }))`
      insert into tenant_invitations (tenant_id, email, role, token_hash, invited_by, expires_at, link_shown)
      values (${tenantId}, ${email}, ${input.role}, ${sql.binary(tokenHash(token))}, ${actor.userId}, now() + make_interval(hours => ${settings.invitationTtlHours}), ${settings.smtpUrl === null})
      returning id`);
    await recordAudit(tx, {
      tenantId,
      action: 'invitation_created',
      actorId: actor.userId,
      subjectEmail: email,
      invitationId: id,
      toRole: input.role,
      requestId: actor.requestId,
    });
    const emailed = settings.smtpUrl !== null;
    if (emailed) await queueInvitationEmail(tx, { tenantId, invitationId: id, link, keyring: input.keyring });
    const invitation = await tx.one(
      sql.type(InvitationRow)`select ${invitationColumns} from tenant_invitations i where i.id = ${id}`,
    );
    // E-mailed: the link goes only to the mailbox, so the answer does not carry it.
    return { invitation, link: emailed ? null : link, emailed };
  });
}

/** Open invitations (not accepted or revoked; expired ones too, marked by expires_at), newest first. */
export async function listOpenInvitations(
  db: CommonQueryMethods,
  tenantId: string,
  page: { limit: number; after: Position | null },
) {
  return db.any(sql.type(InvitationRow)`
    select ${invitationColumns} from tenant_invitations i
    where i.tenant_id = ${tenantId} and i.accepted_at is null and i.revoked_at is null
      ${page.after ? sql.fragment`and (i.created_at, i.id) < (${page.after.t}::timestamptz, ${page.after.id}::uuid)` : sql.fragment``}
    order by i.created_at desc, i.id desc
    limit ${page.limit + 1}`);
}

export async function revokeInvitation(
  db: CommonQueryMethods,
  tenantId: string,
  actor: Actor,
  invitationId: string,
): Promise<void> {
  await db.transaction(async (tx) => {
    const row = await tx.maybeOne(sql.type(
      z.object({ email: z.string(), accepted: z.boolean(), revoked: z.boolean() }),
    )`
      select email, accepted_at is not null as accepted, revoked_at is not null as revoked
      from tenant_invitations where id = ${invitationId} and tenant_id = ${tenantId} for update`);
    if (!row) throw new InvitationError(404, 'not_found', 'No such invitation.');
    if (row.accepted)
      throw new InvitationError(
        409,
        'invitation_used',
        'This invitation was already accepted; remove the member instead.',
      );
    if (row.revoked) return;
    await tx.query(sql.unsafe`update tenant_invitations set revoked_at = now() where id = ${invitationId}`);
    await tx.query(
      sql.unsafe`update invitation_emails set status = 'cancelled', sealed_link = null where invitation_id = ${invitationId} and status = 'queued'`,
    );
    await recordAudit(tx, {
      tenantId,
      action: 'invitation_revoked',
      actorId: actor.userId,
      subjectEmail: row.email,
      invitationId,
      requestId: actor.requestId,
    });
  });
}
