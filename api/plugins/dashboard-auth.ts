// Dashboard authentication ("Dashboard Auth"): a bearer dashboard JWT from
// POST /api/dashboard/auth/login or /totp-login. Routes opt in with
// `onRequest: app.requireDashboard`. A valid signature is not enough: the
// license must still be active (not revoked, not expired).
import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { bearerToken, InvalidTokenError, verifyDashboardToken } from '../../core/auth/dashboard-token.ts';
import { findLicenseById, type License } from '../../core/dashboard/licenses.ts';
import { PlatformHttpError } from '../errors.ts';

declare module 'fastify' {
  interface FastifyRequest {
    license: License | null;
  }
  interface FastifyInstance {
    requireDashboard: (request: FastifyRequest) => Promise<void>;
  }
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

const unauthorized = (message: string, challenge = 'Bearer') =>
  new PlatformHttpError(401, 'unauthorized', message, { 'www-authenticate': challenge });

async function dashboardAuth(app: FastifyInstance) {
  const secret = app.config.secrets.PLATFORM_JWT_SECRET;
  const issuer = app.config.baseUrl;

  app.decorateRequest('license', null);
  app.decorate('requireDashboard', async (request: FastifyRequest) => {
    const token = bearerToken(request.headers.authorization);
    if (!token) throw unauthorized('Send a dashboard token as `Authorization: Bearer <token>`.');
    let licenseId: string;
    try {
      ({ licenseId } = await verifyDashboardToken(token, secret, issuer));
    } catch (error) {
      if (error instanceof InvalidTokenError) {
        throw unauthorized(`The dashboard token was refused (${error.message}).`, 'Bearer error="invalid_token"');
      }
      throw error;
    }
    const license = UUID.test(licenseId) ? await findLicenseById(app.db, licenseId) : null;
    if (!license?.active) {
      throw unauthorized('The license of this token is no longer active.', 'Bearer error="invalid_token"');
    }
    request.license = license;
  });
}

export default fp(dashboardAuth, { name: 'dashboard-auth', dependencies: ['context'] });
