// Accounts: e-mail/password login, token renewal, profile, account deletion.
// Login answers a wrong password and an unknown e-mail alike, in the same time;
// only failures spend the login budget (core/accounts/login-throttle.ts).
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { issueRefreshToken, revokeRefreshToken, rotateRefreshToken } from '../../../core/accounts/refresh-tokens.ts';
import { checkPassword, deleteAccount, findUser, membershipsOf, type UserRow } from '../../../core/accounts/users.ts';
import altidpRoutes from './altidp.ts';
import partnerRoutes from './partner.ts';
import { publicUser, sessionPayload } from './session.ts';
import { PlatformError, PlatformHttpError } from '../../errors.ts';
import { loginWithinBudget } from '../../login-budget.ts';
import { AccountDeleted, LoginBody, Me, RefreshBody, Session } from './schemas.ts';

const errors = { 400: PlatformError, 401: PlatformError, 429: PlatformError };

const authRoutes: FastifyPluginAsyncZod = async (app) => {
  const session = (user: UserRow, refreshToken: string) => sessionPayload(app, user, refreshToken);
  // Logins through external OpenID Connect providers (their own plugins: form parsing, cookies).
  await app.register(partnerRoutes);
  await app.register(altidpRoutes);

  app.post(
    '/api/auth/login',
    {
      schema: {
        operationId: 'login',
        security: [],
        tags: ['auth'],
        summary: 'Log in with e-mail and password; returns a platform JWT and a refresh token',
        description:
          "Only failed attempts count: an account locks after too many wrong passwords, and a network address after many more (429 rate_limited with Retry-After and the time to try again). A correct password clears its account's count.",
        body: LoginBody,
        response: { 200: Session, ...errors },
      },
    },
    async (request) => {
      const { email, password } = request.body;
      const user = await loginWithinBudget(app, request, { kind: 'login', email }, () =>
        checkPassword(app.db, email, password),
      );
      if (!user) throw new PlatformHttpError(401, 'invalid_credentials', 'E-mail or password is wrong.');
      request.log.info({ userId: user.id }, 'login');
      return session(user, await issueRefreshToken(app.db, user.id));
    },
  );

  app.post(
    '/api/auth/refresh',
    {
      schema: {
        operationId: 'refreshLogin',
        security: [],
        tags: ['auth'],
        summary: 'Renew the platform JWT with a refresh token (extension); the refresh token is rotated',
        body: RefreshBody,
        response: { 200: Session, ...errors },
      },
    },
    async (request) => {
      const rotated = await rotateRefreshToken(app.db, request.body.refreshToken);
      if ('error' in rotated) {
        if (rotated.error === 'reused')
          request.log.warn('a used refresh token was presented again; its family is revoked');
        throw new PlatformHttpError(
          401,
          'invalid_refresh_token',
          'The refresh token is invalid, expired or already used; log in again.',
        );
      }
      const user = await findUser(app.db, rotated.userId);
      if (!user) throw new PlatformHttpError(401, 'invalid_refresh_token', 'The account no longer exists.');
      return session(user, rotated.refreshToken);
    },
  );

  app.post(
    '/api/auth/logout',
    {
      schema: {
        operationId: 'logout',
        security: [],
        tags: ['auth'],
        summary: 'Revoke a refresh token and every token rotated from it (extension)',
        body: RefreshBody,
        response: { 204: z.undefined(), 400: PlatformError },
      },
    },
    async (request, reply) => {
      await revokeRefreshToken(app.db, request.body.refreshToken);
      return reply.code(204).send();
    },
  );

  app.get(
    '/api/auth/me',
    {
      onRequest: app.requireUser,
      schema: {
        operationId: 'getProfile',
        tags: ['auth'],
        summary: 'Profile: name, e-mail, avatar, roles and tenant memberships',
        security: [{ PlatformJWT: [] }],
        response: { 200: Me, 401: PlatformError },
      },
    },
    async (request) => {
      const user = await findUser(app.db, request.user!.userId);
      if (!user) throw new PlatformHttpError(401, 'unauthorized', 'The account no longer exists.');
      const memberships = await membershipsOf(app.db, user.id);
      return {
        ...publicUser(user),
        roles: user.is_operator ? ['operator' as const] : [],
        memberships: memberships.map((m) => ({ tenantId: m.tenant_id, tenantName: m.tenant_name, role: m.role })),
      };
    },
  );

  app.delete(
    '/api/auth/account',
    {
      onRequest: app.requireUser,
      schema: {
        operationId: 'deleteAccount',
        tags: ['auth'],
        summary: 'Permanently delete the account; tenants it was the only member of go with it',
        security: [{ PlatformJWT: [] }],
        response: { 200: AccountDeleted, 401: PlatformError },
      },
    },
    async (request) => {
      const { deletedTenants } = await deleteAccount(app.db, request.user!.userId);
      request.log.info({ userId: request.user!.userId, deletedTenants }, 'account deleted');
      return { deleted: true as const, deletedTenants };
    },
  );
};

export default authRoutes;
