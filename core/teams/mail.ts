// Sends one invitation e-mail of the outbox (invitation_emails) through the
// SMTP server of SMTP_URL, with nodemailer. A job per e-mail
// (team.invitation_email): a refusal the server calls temporary (4xx), a
// timeout or a lost connection is retried with the usual backoff; a
// permanent one (5xx) fails the job at once. Either way the sealed link
// leaves the table when the e-mail is sent or given up on. An invitation
// revoked, replaced or accepted meanwhile is not mailed.
import type { Transporter } from 'nodemailer';
import { z } from 'zod';
import type { Keyring } from '../crypto/keyring.ts';
import { sql, type CommonQueryMethods } from '../db/pool.ts';
import { PermanentJobError, RetryableJobError } from '../jobs/errors.ts';
import { lazyRequire } from '../lazy-require.ts';
import { flattenName } from '../names.ts';
import { ROLE_TITLES, TenantRoleSchema, type TenantRole } from '../tenants/roles.ts';
import type { TeamSettings } from './settings.ts';

const nodemailer = lazyRequire<typeof import('nodemailer')>('nodemailer');

export const InvitationEmailInput = z.object({ emailId: z.uuid() });

const transports = new Map<string, Transporter>();
/** One pooled connection per SMTP server and process. */
function transportFor(url: string): Transporter {
  let transport = transports.get(url);
  if (!transport) {
    transport = nodemailer().createTransport(url, {
      connectionTimeout: 10_000,
      greetingTimeout: 10_000,
      socketTimeout: 20_000,
    } as never);
    transports.set(url, transport);
  }
  return transport;
}

const Outbox = z.object({
  status: z.string(),
  sealed_link: z.string().nullable(),
  invitation_id: z.string(),
  email: z.string(),
  role: TenantRoleSchema,
  open: z.boolean(),
  expires_at: z.string(),
  tenant_name: z.string(),
  inviter: z.string().nullable(),
});

export type MailContext = {
  db: CommonQueryMethods;
  keyring: Keyring;
  settings: TeamSettings;
  attempt: number;
  maxAttempts: number;
};

export function invitationMessage(o: {
  tenantName: string;
  inviter: string;
  role: TenantRole;
  link: string;
  expiresAt: Date;
}) {
  // Names stored before control characters were refused must not start lines of their own.
  const inviter = flattenName(o.inviter);
  const tenantName = flattenName(o.tenantName);
  const subject = `${inviter} invited you to ${tenantName}`;
  const text = [
    `${inviter} invited you to join the workspace "${tenantName}" as ${ROLE_TITLES[o.role]}.`,
    '',
    'Open this link to accept (it works once):',
    o.link,
    '',
    `The invitation expires on ${o.expiresAt.toUTCString()}.`,
    'If you did not expect it, ignore this e-mail.',
  ].join('\n');
  return { subject, text };
}

/** Sends the e-mail, or ends without sending when there is nothing to send. */
export async function sendInvitationEmail(
  emailId: string,
  ctx: MailContext,
): Promise<{ outcome: 'sent' | 'not_sent'; reason?: string }> {
  const row = await ctx.db.maybeOne(sql.type(Outbox)`
    select e.status, e.sealed_link, i.id as invitation_id, i.email, i.role,
      (i.accepted_at is null and i.revoked_at is null and i.expires_at > now()) as open, i.expires_at, t.name as tenant_name,
      (select coalesce(display_name, email) from users where id = i.invited_by) as inviter
    from invitation_emails e join tenant_invitations i on i.id = e.invitation_id join tenants t on t.id = i.tenant_id
    where e.id = ${emailId}`);
  if (row?.status !== 'queued' || !row.sealed_link)
    return { outcome: 'not_sent', reason: row ? `the e-mail is ${row.status}` : 'the e-mail is gone' };
  if (!row.open) {
    await ctx.db.query(
      sql.unsafe`update invitation_emails set status = 'cancelled', sealed_link = null where id = ${emailId}`,
    );
    return { outcome: 'not_sent', reason: 'the invitation is no longer open' };
  }
  if (!ctx.settings.smtpUrl) {
    // Given up on: the sealed link leaves the table, as after a refusal.
    await ctx.db.query(sql.unsafe`
      update invitation_emails set status = 'failed', sealed_link = null, last_error = 'SMTP_URL is not set on the worker' where id = ${emailId}`);
    throw new PermanentJobError(
      'smtp_not_configured',
      'SMTP_URL is no longer set; the invitation e-mail cannot be sent.',
    );
  }
  const link = ctx.keyring.openPacked(row.sealed_link, `invitation-email:${row.invitation_id}`);
  const message = invitationMessage({
    tenantName: row.tenant_name,
    inviter: row.inviter ?? 'An Admin',
    role: row.role,
    link,
    expiresAt: new Date(row.expires_at),
  });
  try {
    await transportFor(ctx.settings.smtpUrl).sendMail({ from: ctx.settings.mailFrom, to: row.email, ...message });
  } catch (error) {
    const code = (error as { responseCode?: number }).responseCode;
    const detail = code
      ? `the SMTP server answered ${code}`
      : `the SMTP server could not be reached (${(error as Error).message.slice(0, 200)})`;
    const permanent = code !== undefined && code >= 500;
    const last = ctx.attempt >= ctx.maxAttempts;
    await ctx.db.query(sql.unsafe`
      update invitation_emails set attempts = attempts + 1, last_error = ${detail},
        status = case when ${permanent || last} then 'failed' else status end,
        sealed_link = case when ${permanent || last} then null else sealed_link end
      where id = ${emailId}`);
    if (permanent) throw new PermanentJobError('smtp_refused', `The invitation e-mail was refused: ${detail}.`);
    throw new RetryableJobError('smtp_unavailable', `The invitation e-mail could not be sent yet: ${detail}.`);
  }
  await ctx.db.query(sql.unsafe`
    update invitation_emails set status = 'sent', sealed_link = null, sent_at = now(), attempts = attempts + 1, last_error = null
    where id = ${emailId} and status = 'queued'`);
  return { outcome: 'sent' };
}
