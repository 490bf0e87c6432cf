// The bounds of invitations, and where invitation e-mails go out. Without
// SMTP_URL nothing is mailed: the Admin passes the link on.
import { z } from 'zod';

export type TeamSettings = {
  invitationTtlHours: number;
  invitationsPerDay: number;
  pendingInvitations: number;
  /** smtp:// or smtps:// URL (credentials in it); null: invitation e-mails are not sent. */
  smtpUrl: string | null;
  mailFrom: string;
};

const smtpUrl = z
  .string()
  .trim()
  .refine((v) => {
    try {
      return ['smtp:', 'smtps:'].includes(new URL(v).protocol);
    } catch {
      return false;
    }
  }, 'must be an smtp:// or smtps:// URL, e.g. smtp://user:password@mail.example.com:587');

export const teamEnv = {
  INVITATION_TTL_HOURS: z.coerce.number().int().min(1).max(30 * 24).default(7 * 24),
  INVITATIONS_PER_DAY: z.coerce.number().int().min(1).max(100_000).default(50),
  INVITATIONS_PENDING_MAX: z.coerce.number().int().min(1).max(100_000).default(100),
  SMTP_URL: smtpUrl.optional(),
  MAIL_FROM: z.string().trim().min(3).max(320).optional(),
};

export function teamSettings(
  e: { INVITATION_TTL_HOURS: number; INVITATIONS_PER_DAY: number; INVITATIONS_PENDING_MAX: number; SMTP_URL?: string; MAIL_FROM?: string },
  baseUrl: string,
): TeamSettings {
  return {
    invitationTtlHours: e.INVITATION_TTL_HOURS,
    invitationsPerDay: e.INVITATIONS_PER_DAY,
    pendingInvitations: e.INVITATIONS_PENDING_MAX,
    smtpUrl: e.SMTP_URL ?? null,
    mailFrom: e.MAIL_FROM ?? `Agent platform <no-reply@${new URL(baseUrl).hostname}>`,
  };
}
