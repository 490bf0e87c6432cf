// POST /api/invitations/accept: accepting an invitation from a program (the
// accept page does the same for people). With a platform token, the signed-in
// person joins if their e-mail is the invited one; without one, `name` and
// `password` make the account of the invited address, which joins and is
// signed in (the answer carries its first login).
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { issueRefreshToken } from '../../../core/accounts/refresh-tokens.ts';
import { hashPassword } from '../../../core/crypto/passwords.ts';
import { LIMITS } from '../../../core/rate-limit.ts';
import { acceptInvitation, type Acceptor } from '../../../core/teams/invitation-acceptance.ts';
import { PlatformError, PlatformHttpError } from '../../errors.ts';
import { sessionPayload } from '../auth/session.ts';
import { teamRefusal } from './refusals.ts';
import { AcceptBody, Accepted } from './schemas.ts';

/** Accepts for the signed-in person, or for a new account; answers what the route answers. */
export async function acceptFor(app: FastifyInstance, request: FastifyRequest, token: string, who: Acceptor) {
  try {
    const { view, user, created } = await acceptInvitation(app.db, token, who);
    app.forgetMembership(view.tenant_id, user.id);
    request.log.info(
      { tenantId: view.tenant_id, invitationId: view.id, userId: user.id, role: view.role, newAccount: created },
      'invitation accepted',
    );
    return { view, user, created };
  } catch (error) {
    throw teamRefusal(error);
  }
}

const acceptRoutes: FastifyPluginAsyncZod = async (app) => {
  app.post(
    '/api/invitations/accept',
    {
      onRequest: app.rateLimit(LIMITS.invitationAccept),
      schema: {
        operationId: 'acceptInvitation',
        tags: ['teams'],
        summary: 'Accept an invitation: as the signed-in person, or as a new account of the invited address',
        description:
          'With `Authorization: Bearer <platform token>`: the signed-in person joins when their e-mail is the invited one (403 `invitation_email_mismatch` otherwise). ' +
          'Without it: `name` and `password` make the account of the invited address (409 `account_exists` when it has one: sign in first), and the answer carries its first login. ' +
          'An invitation works once: expired, revoked and used ones answer 410 `invitation_expired`, `invitation_revoked`, `invitation_used`; an unknown token 404.',
        security: [{ PlatformJWT: [] }, {}],
        body: AcceptBody,
        response: {
          200: Accepted,
          400: PlatformError,
          401: PlatformError,
          403: PlatformError,
          404: PlatformError,
          409: PlatformError,
          410: PlatformError,
          429: PlatformError,
        },
      },
    },
    async (request) => {
      const { token, name, password } = request.body;
      let who: Acceptor;
      if (request.headers.authorization !== undefined) {
        await app.requireUser(request);
        who = { userId: request.user!.userId };
      } else {
        if (!name || !password) {
          throw new PlatformHttpError(
            400,
            'invalid_request',
            'Without a platform token, send `name` and `password` for the new account of the invited address (or sign in and send the token as Authorization).',
          );
        }
        who = { newAccount: { displayName: name, passwordHash: await hashPassword(password) } };
      }
      const { view, user, created } = await acceptFor(app, request, token, who);
      const session = created ? await sessionPayload(app, user, await issueRefreshToken(app.db, user.id)) : null;
      return { tenantId: view.tenant_id, tenantName: view.tenant_name, role: view.role, session };
    },
  );
};

export default acceptRoutes;
