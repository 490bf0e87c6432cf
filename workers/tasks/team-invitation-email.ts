// team.invitation_email: sends one invitation e-mail of the outbox
// (core/teams/mail.ts). A platform job of the inviting workspace, so the
// invitation list shows how its e-mail went; retried with backoff.
import { Keyring } from '../../core/crypto/keyring.ts';
import { INVITATION_EMAIL_JOB } from '../../core/teams/invitations.ts';
import { InvitationEmailInput, sendInvitationEmail } from '../../core/teams/mail.ts';
import { defineTask } from '../define-task.ts';

export default defineTask(INVITATION_EMAIL_JOB, InvitationEmailInput, async (input, ctx) => {
  const result = await sendInvitationEmail(input.emailId, {
    db: ctx.db,
    keyring: Keyring.fromConfig(ctx.config),
    settings: ctx.config.teams,
    attempt: ctx.attempt,
    maxAttempts: ctx.maxAttempts,
  });
  ctx.logger.info(
    { kind: INVITATION_EMAIL_JOB, jobId: ctx.jobId, emailId: input.emailId, ...result },
    result.outcome === 'sent' ? 'invitation e-mail sent' : 'invitation e-mail not sent',
  );
  return result;
});
