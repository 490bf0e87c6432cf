// Platform authentication ("JWT" in the spec's Auth column): a bearer JWT
// signed with PLATFORM_JWT_SECRET. Routes opt in with `preHandler: app.requireUser`.
// The accounts area adds login, tenants and roles on top of this.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { bearerToken, InvalidTokenError, verifyPlatformToken, type PlatformPrincipal } from '../../core/auth/platform-token.ts';
import { PlatformHttpError } from '../errors.ts';

declare module 'fastify' {
  interface FastifyRequest {
    user: PlatformPrincipal | null;
  }
  interface FastifyInstance {
    requireUser: (request: FastifyRequest) => Promise<void>;
    authenticateToken: (token: string) => Promise<PlatformPrincipal>;
  }
}

async function platformAuth(app: FastifyInstance) {
  const secret = app.config.secrets.PLATFORM_JWT_SECRET;
  const issuer = app.config.baseUrl;
  app.decorateRequest('user', null);
  app.decorate('authenticateToken', (token: string) => verifyPlatformToken(token, secret, issuer));
  app.decorate('requireUser', async (request: FastifyRequest) => {
    const token = bearerToken(request.headers.authorization);
    if (!token) throw new PlatformHttpError(401, 'unauthorized', 'Send a platform token as `Authorization: Bearer <token>`.', { 'www-authenticate': 'Bearer' });
    try {
      request.user = await verifyPlatformToken(token, secret, issuer);
    } catch (error) {
      if (error instanceof InvalidTokenError) {
        throw new PlatformHttpError(401, 'unauthorized', `The platform token is invalid: ${error.message}.`, { 'www-authenticate': 'Bearer error="invalid_token"' });
      }
      throw error;
    }
  });
}

export default fp(platformAuth, { name: 'platform-auth', dependencies: ['context'] });
