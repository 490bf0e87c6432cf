// Platform authentication ("JWT" in the spec's Auth column): a bearer JWT
// signed with PLATFORM_JWT_SECRET. Routes opt in with
// `onRequest: app.requireUser` (runs before validation, so a request without
// a token is 401 whatever else is wrong with it) or `app.requireOperator`
// (the global Admin of the Auth column).
import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { z } from 'zod';
import { bearerToken, InvalidTokenError, verifyPlatformToken } from '../../core/auth/platform-token.ts';
import { InvalidatedCache } from '../../core/cache/invalidated-cache.ts';
import { sql } from '../../core/db/pool.ts';
import { PlatformHttpError } from '../errors.ts';

export type AuthenticatedUser = { userId: string; isOperator: boolean };
/** What a token proves, until when: a websocket outlives a request and must close at the expiry. */
export type TokenUser = AuthenticatedUser & { expiresAt: Date };

declare module 'fastify' {
  interface FastifyRequest {
    user: AuthenticatedUser | null;
  }
  interface FastifyInstance {
    requireUser: (request: FastifyRequest) => Promise<void>;
    requireOperator: (request: FastifyRequest) => Promise<void>;
    authenticateToken: (token: string) => Promise<TokenUser>;
  }
}

const unauthorized = (message: string, challenge = 'Bearer') =>
  new PlatformHttpError(401, 'unauthorized', message, { 'www-authenticate': challenge });

async function platformAuth(app: FastifyInstance) {
  const secret = app.config.secrets.PLATFORM_JWT_SECRET;
  const issuer = app.config.baseUrl;

  // A valid signature is not enough: the account must still exist (cached
  // per replica, dropped by NOTIFY when the user changes or is deleted).
  const users = new InvalidatedCache<{ is_operator: boolean } | null>(app.jobEvents, 'user_cache_events');
  const authenticateToken = async (token: string): Promise<TokenUser> => {
    const { userId, expiresAt } = await verifyPlatformToken(token, secret, issuer);
    const row = await users.get(`user:${userId}`, () =>
      app.db.maybeOne(
        sql.type(z.object({ is_operator: z.boolean() }))`select is_operator from users where id = ${userId}`,
      ),
    );
    if (!row) throw new InvalidTokenError('account no longer exists');
    return { userId, isOperator: row.is_operator, expiresAt };
  };

  app.decorateRequest('user', null);
  app.decorate('authenticateToken', authenticateToken);
  app.decorate('requireUser', async (request: FastifyRequest) => {
    const token = bearerToken(request.headers.authorization);
    if (!token) throw unauthorized('Send a platform token as `Authorization: Bearer <token>`.');
    try {
      request.user = await authenticateToken(token);
    } catch (error) {
      if (error instanceof InvalidTokenError) {
        throw unauthorized(`The platform token was refused (${error.message}).`, 'Bearer error="invalid_token"');
      }
      throw error;
    }
  });
  app.decorate('requireOperator', async (request: FastifyRequest) => {
    await app.requireUser(request);
    if (!request.user!.isOperator)
      throw new PlatformHttpError(403, 'forbidden', 'Only the platform operator may do this.');
  });
}

export default fp(platformAuth, { name: 'platform-auth', dependencies: ['context'] });
