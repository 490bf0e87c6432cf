// Accepting an invitation: what a token shows before it is used (inspectInvitation, notOpen) and
// its one-time acceptance by the invited person, signed in or with a new account made for the address.
import { z } from 'zod';
import { sameEmail } from '../accounts/email.ts';
import { createUserIn, EmailTakenError, findUser, type UserRow } from '../accounts/users.ts';
import { sql, type CommonQueryMethods, type DatabasePool } from '../db/pool.ts';
import { TenantRoleSchema } from '../tenants/roles.ts';
import { recordAudit } from './audit.ts';
import { InvitationError, TOKEN_PREFIX, tokenHash } from './invitations.ts';
import { lockTenant } from './members.ts';

/** What the accept page and API show of an invitation before it is accepted. */
export const InvitationView = z.object({
  id: z.string(),
  tenant_id: z.string(),
  tenant_name: z.string(),
  email: z.string(),
  role: TenantRoleSchema,
  invited_by: z.string().nullable(),
  expires_at: z.string(),
  state: z.enum(['open', 'expired', 'revoked', 'accepted']),
  has_account: z.boolean(),
  accepted_by: z.string().nullable(),
  /** The Admin was shown the link (no SMTP): accepting it proves no mailbox. */
  link_shown: z.boolean(),
});
export type InvitationView = z.infer<typeof InvitationView>;

/** The invitation behind a token, in whatever state (null: no such token). */
export async function inspectInvitation(
  db: CommonQueryMethods,
  token: string,
  lock = false,
): Promise<InvitationView | null> {
  if (!token.startsWith(TOKEN_PREFIX) || token.length > 200) return null;
  return db.maybeOne(sql.type(InvitationView)`
    select i.id, i.tenant_id, t.name as tenant_name, i.email, i.role,
      coalesce((select coalesce(display_name, email) from users where id = i.invited_by), 'An Admin') as invited_by, i.expires_at,
      case when i.accepted_at is not null then 'accepted' when i.revoked_at is not null then 'revoked' when i.expires_at <= now() then 'expired' else 'open' end as state,
      exists (select 1 from users u where u.email_key = canonical_email(i.email)) as has_account, i.accepted_by, i.link_shown
    from tenant_invitations i join tenants t on t.id = i.tenant_id
    where i.token_hash = ${sql.binary(tokenHash(token))}
    ${lock ? sql.fragment`for update of i` : sql.fragment``}`);
}

/** The refusal for an invitation that is not open. */
export function notOpen(view: InvitationView): InvitationError | null {
  if (view.state === 'expired')
    return new InvitationError(
      410,
      'invitation_expired',
      'This invitation has expired; ask an Admin of the workspace for a new one.',
    );
  if (view.state === 'revoked')
    return new InvitationError(
      410,
      'invitation_revoked',
      'This invitation was revoked (or replaced by a newer one); ask an Admin of the workspace for a new one.',
    );
  if (view.state === 'accepted')
    return new InvitationError(
      410,
      'invitation_used',
      'This invitation was already accepted; an invitation works once.',
    );
  return null;
}

/** Who accepts: a signed-in person, or a new account made for the invited address. */
export type Acceptor = { userId: string } | { newAccount: { displayName: string; passwordHash: string } };

/**
 * Accepts an invitation once: the accepting person's e-mail must be the
 * invited one; a new account is made for it when asked (and none exists).
 * Returns the membership made and the user.
 */
export async function acceptInvitation(
  db: DatabasePool,
  token: string,
  who: Acceptor,
): Promise<{ view: InvitationView; user: UserRow; created: boolean }> {
  return db.transaction(async (tx) => {
    // The workspace first, then the invitation: the order inviting and resending take, so none of them deadlocks.
    const seen = await inspectInvitation(tx, token);
    if (seen) await lockTenant(tx, seen.tenant_id);
    const view = seen && (await inspectInvitation(tx, token, true));
    if (!view) throw new InvitationError(404, 'not_found', 'No such invitation: check that the whole link was copied.');
    const closed = notOpen(view);
    if (closed) throw closed;
    let user: UserRow;
    let created = false;
    if ('userId' in who) {
      const found = await findUser(tx, who.userId);
      if (!found)
        throw new InvitationError(403, 'invitation_email_mismatch', 'This invitation is for another e-mail address.');
      if (!sameEmail(found.email, view.email)) {
        throw new InvitationError(
          403,
          'invitation_email_mismatch',
          `This invitation is for ${view.email}; you are signed in as ${found.email}. Sign in with the invited address, or ask for an invitation to yours.`,
        );
      }
      user = found;
      // A link that went only to the mailbox, opened by its signed-in owner: the e-mail is proved.
      if (!view.link_shown)
        await tx.query(sql.unsafe`update users set email_verified = true where id = ${user.id} and not email_verified`);
    } else {
      try {
        user = await createUserIn(tx, {
          email: view.email,
          passwordHash: who.newAccount.passwordHash,
          displayName: who.newAccount.displayName,
          // Made from a link the Admin saw: whoever typed the address may not own it.
          emailVerified: !view.link_shown,
        });
      } catch (error) {
        if (error instanceof EmailTakenError)
          throw new InvitationError(
            409,
            'account_exists',
            `An account for ${view.email} already exists: sign in and accept the invitation there.`,
          );
        throw error;
      }
      created = true;
    }
    const inserted = await tx.maybeOne(sql.unsafe`
      insert into tenant_memberships (tenant_id, user_id, role) values (${view.tenant_id}, ${user.id}, ${view.role})
      on conflict do nothing returning user_id`);
    if (!inserted) throw new InvitationError(409, 'already_member', `You are already a member of ${view.tenant_name}.`);
    await tx.query(
      sql.unsafe`update tenant_invitations set accepted_at = now(), accepted_by = ${user.id} where id = ${view.id}`,
    );
    await tx.query(
      sql.unsafe`update invitation_emails set status = 'cancelled', sealed_link = null where invitation_id = ${view.id} and status = 'queued'`,
    );
    await recordAudit(tx, {
      tenantId: view.tenant_id,
      action: 'invitation_accepted',
      actorId: user.id,
      subjectId: user.id,
      invitationId: view.id,
      toRole: view.role,
    });
    return { view: { ...view, state: 'accepted' as const, accepted_by: user.id }, user, created };
  });
}
