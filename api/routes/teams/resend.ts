// POST /api/tenants/invitations/:invitationId/resend: an Admin has an
// invitation's e-mail sent again (SMTP configured) with a new link; the
// old link stops working. The answer never carries the link: it went only
// to the invitee's mailbox. The rules are in core/teams/invitation-resend.ts.
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { Keyring } from '../../../core/crypto/keyring.ts';
import { resendInvitation } from '../../../core/teams/invitation-resend.ts';
import { PlatformError } from '../../errors.ts';
import { TenantHeaders } from '../../plugins/tenant.ts';
import { teamRefusal } from './refusals.ts';
import { ResentInvitation, toInvitation } from './schemas.ts';

const invitationResendRoutes: FastifyPluginAsyncZod = async (app) => {
  const keyring = Keyring.fromConfig(app.config);

  app.post(
    '/api/tenants/invitations/:invitationId/resend',
    {
      onRequest: app.requireUser,
      preValidation: app.requireTenant('admin'),
      schema: {
        operationId: 'resendTenantInvitation',
        tags: ['teams'],
        summary: 'E-mail an open invitation again with a new link (Admin); the old link stops working',
        description:
          "Needs SMTP (409 `email_not_configured` without: invite the address again for a link to pass on). The new link goes only to the invitee's mailbox and is not in the answer; " +
          'the role and expiry stay. Counts against INVITATIONS_PER_DAY like an invitation (429 `invitation_limit`). ' +
          'An accepted, revoked or expired invitation is 409 `invitation_used`, `invitation_revoked`, `invitation_expired`. Audited.',
        security: [{ PlatformJWT: [] }],
        headers: TenantHeaders,
        params: z.object({ invitationId: z.uuid() }),
        response: {
          200: ResentInvitation,
          400: PlatformError,
          401: PlatformError,
          403: PlatformError,
          404: PlatformError,
          409: PlatformError,
          429: PlatformError,
        },
      },
    },
    async (request) => {
      let row;
      try {
        row = await resendInvitation(app.db, {
          tenantId: request.tenant!.id,
          actor: { userId: request.user!.userId, requestId: request.id },
          invitationId: request.params.invitationId,
          settings: app.config.teams,
          baseUrl: app.config.baseUrl,
          keyring,
        });
      } catch (error) {
        throw teamRefusal(error);
      }
      request.log.info({ tenantId: request.tenant!.id, invitationId: row.id }, 'invitation e-mail re-sent');
      return {
        ...toInvitation(row),
        message: `A new link was sent by e-mail to ${row.email} only; the earlier link no longer works.`,
      };
    },
  );
};

export default invitationResendRoutes;
