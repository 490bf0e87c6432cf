// Invitations' bounds, and where invitation e-mails go out (core/teams/).
import { z } from 'zod';
import { group, setting } from '../declare.ts';
import { intFromEnv, smtpUrl } from '../parsers.ts';

export const teams = group(
  'Teams and invitations',
  'See [Teams](accounts-and-tenants.md#teams-members-roles-and-invitations).',
  {
    INVITATION_TTL_HOURS: setting(intFromEnv(1, 30 * 24), {
      default: 7 * 24,
      shown: '`168` (7 days)',
      doc: 'How long an invitation link works',
    }),
    INVITATIONS_PER_DAY: setting(intFromEnv(1, 100_000), {
      default: 50,
      doc: 'Invitations one workspace may send in 24 hours (`429 invitation_limit` beyond)',
    }),
    INVITATIONS_PENDING_MAX: setting(intFromEnv(1, 100_000), {
      default: 100,
      doc: 'Open invitations one workspace may have at once (`409 too_many_pending_invitations` beyond)',
    }),
    SMTP_URL: setting(smtpUrl, {
      shown:
        'unset (invitation links are not e-mailed; the Admin passes them on, and accounts made from them are unverified)',
      doc: "`smtp://user:password@host:587` (STARTTLS when the server offers it) or `smtps://...` (TLS from the start): the server invitation e-mails go through; when set, an invitation link goes only to the invitee's mailbox",
    }),
    MAIL_FROM: setting(z.string().trim().min(3).max(320), {
      shown: '`Agent platform <no-reply@host of BASE_URL>`',
      doc: 'The sender of invitation e-mails',
    }),
  },
);
