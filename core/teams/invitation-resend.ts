// Re-sending an invitation's e-mail (SMTP configured): a lost or refused
// e-mail, or one the invitee deleted. The invitation gets a new link (the
// old one stops working, and so does one an Admin saw before SMTP was set:
// from then on the link went only to the mailbox) and a new e-mail job; its
// role and expiry stay. A re-send counts against INVITATIONS_PER_DAY, like
// an invitation, so it cannot flood a mailbox.
import { z } from 'zod';
import type { Keyring } from '../crypto/keyring.ts';
import { randomToken } from '../crypto/tokens.ts';
import { sql, type CommonQueryMethods } from '../db/pool.ts';
import { recordAudit } from './audit.ts';
import {
  InvitationError,
  invitationColumns,
  invitationLink,
  InvitationRow,
  queueInvitationEmail,
  resentToday,
  TOKEN_PREFIX,
  tokenHash,
} from './invitations.ts';
import { lockTenant, type Actor } from './members.ts';
import type { TeamSettings } from './settings.ts';

const Locked = z.object({
  email: z.string(),
  state: z.enum(['open', 'expired', 'revoked', 'accepted']),
  today: z.number(),
});

/** Why an invitation in `state` cannot be re-sent. */
function closed(state: z.infer<typeof Locked>['state']): InvitationError | null {
  if (state === 'accepted')
    return new InvitationError(409, 'invitation_used', 'This invitation was already accepted; nothing to re-send.');
  if (state === 'revoked')
    return new InvitationError(
      409,
      'invitation_revoked',
      'This invitation was revoked (or replaced by a newer one); invite the address again instead.',
    );
  if (state === 'expired')
    return new InvitationError(
      409,
      'invitation_expired',
      'This invitation has expired; invite the address again instead.',
    );
  return null;
}

/**
 * E-mails an open invitation again with a new link, audited. Refused (in
 * this order): an invitation of another workspace or none (404), one not
 * open (409), no SMTP server (409 email_not_configured), past the day's bound (429).
 */
export async function resendInvitation(
  db: CommonQueryMethods,
  input: {
    tenantId: string;
    actor: Actor;
    invitationId: string;
    settings: TeamSettings;
    baseUrl: string;
    keyring: Keyring;
  },
): Promise<InvitationRow> {
  const { tenantId, actor, invitationId, settings } = input;
  return db.transaction(async (tx) => {
    // The workspace's invitations one at a time, as when one is made: the day's bound holds.
    await lockTenant(tx, tenantId);
    const row = await tx.maybeOne(sql.type(Locked)`
      select email,
        case when accepted_at is not null then 'accepted' when revoked_at is not null then 'revoked'
          when expires_at <= now() then 'expired' else 'open' end as state,
        ((select count(*) from tenant_invitations c where c.tenant_id = ${tenantId} and c.created_at > now() - interval '1 day')
          + ${resentToday(tenantId)})::int as today
      from tenant_invitations where id = ${invitationId} and tenant_id = ${tenantId} for update`);
    if (!row) throw new InvitationError(404, 'not_found', 'No such invitation.');
    const refusal = closed(row.state);
    if (refusal) throw refusal;
    if (settings.smtpUrl === null) {
      throw new InvitationError(
        409,
        'email_not_configured',
        'No SMTP server is configured (SMTP_URL), so nothing can be e-mailed; invite the address again for a new link to pass on.',
      );
    }
    if (row.today >= settings.invitationsPerDay) {
      throw new InvitationError(
        429,
        'invitation_limit',
        `This workspace sent ${row.today} invitations and re-sent e-mails in the last 24 hours, the most allowed (INVITATIONS_PER_DAY); try again later.`,
      );
    }
    // The earlier e-mail, if still waiting, goes nowhere: its link stops working now.
    await tx.query(
      sql.unsafe`update invitation_emails set status = 'cancelled', sealed_link = null where invitation_id = ${invitationId} and status = 'queued'`,
    );
    const token = randomToken(TOKEN_PREFIX);
    await tx.query(sql.unsafe`
      update tenant_invitations set token_hash = ${sql.binary(tokenHash(token))}, link_shown = false where id = ${invitationId}`);
    const link = invitationLink(input.baseUrl, token);
    await queueInvitationEmail(tx, { tenantId, invitationId, link, keyring: input.keyring });
    await recordAudit(tx, {
      tenantId,
      action: 'invitation_resent',
      actorId: actor.userId,
      subjectEmail: row.email,
      invitationId,
      requestId: actor.requestId,
    });
    return tx.one(
      sql.type(InvitationRow)`select ${invitationColumns} from tenant_invitations i where i.id = ${invitationId}`,
    );
  });
}
