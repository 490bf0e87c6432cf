// Dashboard licenses: log in with a license key (then a TOTP or recovery code
// when two-factor is on), read the license and its entitlements, and turn
// TOTP on. Secrets (the key, the TOTP secret, recovery codes) appear only in
// the responses that hand them out, never in a log line.
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { DASHBOARD_TOKEN_TTL_S, signDashboardToken } from '../../../core/auth/dashboard-token.ts';
import { entitlementsOf, findLicenseByKey, recoveryCodesRemaining } from '../../../core/dashboard/licenses.ts';
import {
  beginTotpSetup,
  confirmTotpSetup,
  loginWithSecondFactor,
  regenerateRecoveryCodes,
  TotpStateError,
} from '../../../core/dashboard/totp.ts';
import { LIMITS } from '../../../core/rate-limit.ts';
import { PlatformError, PlatformHttpError } from '../../errors.ts';
import { loginWithinBudget } from '../../login-budget.ts';
import dashboardAuth from '../../plugins/dashboard-auth.ts';
import {
  DashboardMe,
  DashboardSession,
  LicenseLoginBody,
  LicenseLoginResult,
  RecoveryCodes,
  TotpCodeBody,
  TotpEnabled,
  TotpLoginBody,
  TotpSetupResult,
} from './schemas.ts';

const security = [{ DashboardJWT: [] }];
const tags = ['dashboard'];

// One message for every failed second factor, so the answer tells nothing
// about whether the e-mail belongs to a license.
const invalidSecondFactor = () =>
  new PlatformHttpError(401, 'invalid_code', 'The e-mail or the code is not valid, or the code was already used.');
const invalidCode = () =>
  new PlatformHttpError(400, 'invalid_code', 'The code is wrong or was already used; wait for the next code.');

function stateConflict(error: unknown): never {
  if (error instanceof TotpStateError) {
    if (error.reason === 'already_enabled')
      throw new PlatformHttpError(409, 'totp_already_enabled', 'Two-factor authentication is already on.');
    if (error.reason === 'not_pending')
      throw new PlatformHttpError(409, 'totp_setup_required', 'Start with POST /api/dashboard/totp/setup.');
    throw new PlatformHttpError(409, 'totp_not_enabled', 'Two-factor authentication is off; set it up first.');
  }
  throw error;
}

const dashboardRoutes: FastifyPluginAsyncZod = async (app) => {
  // Registered here because api/app.ts does not; skipped if it already is.
  if (!app.hasDecorator('requireDashboard')) await app.register(dashboardAuth);

  const encryptionKey = app.config.secrets.DATA_ENCRYPTION_KEY;
  // A signed-in license confirming a code: bounded per license.
  const codeLimit = app.rateLimit(LIMITS.secondFactorCheck, (request) => request.license?.id ?? request.ip);
  // Dashboard logins spend the login budget: a wrong license key counts against the address, a wrong code also against the purchaser's e-mail.
  const budget = { what: 'dashboard login', accountFailures: 'wrong codes for this license' };
  const session = async (licenseId: string) => ({
    token: await signDashboardToken({ licenseId }, app.config.secrets.PLATFORM_JWT_SECRET, app.config.baseUrl),
    tokenType: 'Bearer' as const,
    expiresIn: DASHBOARD_TOKEN_TTL_S,
  });

  app.post(
    '/api/dashboard/auth/login',
    {
      schema: {
        operationId: 'dashboardLogin',
        security: [],
        tags,
        summary: 'Log in with a license key; returns a dashboard JWT or signals that TOTP is required',
        body: LicenseLoginBody,
        response: { 200: LicenseLoginResult, 400: PlatformError, 401: PlatformError, 429: PlatformError },
      },
    },
    async (request) => {
      const license = await loginWithinBudget(
        app,
        request,
        null,
        async () => {
          const found = await findLicenseByKey(app.db, request.body.licenseKey);
          return found?.active ? found : null;
        },
        budget,
      );
      if (!license)
        throw new PlatformHttpError(401, 'invalid_license', 'The license key is unknown, revoked or expired.');
      if (license.twoFactorEnabled) {
        return {
          totpRequired: true as const,
          message:
            'Two-factor authentication is on: POST /api/dashboard/auth/totp-login with the purchaser e-mail and a code.',
        };
      }
      request.log.info({ licenseId: license.id }, 'dashboard login');
      return session(license.id);
    },
  );

  app.post(
    '/api/dashboard/auth/totp-login',
    {
      schema: {
        operationId: 'dashboardTotpLogin',
        security: [],
        tags,
        summary: 'Finish a dashboard login with the purchaser e-mail plus a TOTP code or a recovery code',
        description:
          'Each TOTP code and each recovery code is accepted once. A wrong code and an unknown e-mail get the same 401.',
        body: TotpLoginBody,
        response: { 200: DashboardSession, 400: PlatformError, 401: PlatformError, 429: PlatformError },
      },
    },
    async (request) => {
      const { email, code } = request.body;
      const found = await loginWithinBudget(
        app,
        request,
        { kind: 'dashboard', email },
        () => loginWithSecondFactor(app.db, encryptionKey, email, code),
        budget,
      );
      if (!found) throw invalidSecondFactor();
      request.log.info({ licenseId: found.licenseId, method: found.method }, 'dashboard login with second factor');
      return session(found.licenseId);
    },
  );

  app.get(
    '/api/dashboard/auth/me',
    {
      onRequest: app.requireDashboard,
      schema: {
        operationId: 'getDashboardLicense',
        tags,
        summary: 'License information and feature entitlements',
        security,
        response: { 200: DashboardMe, 401: PlatformError },
      },
    },
    async (request) => {
      const license = request.license!;
      return {
        id: license.id,
        keyHint: license.keyHint,
        purchaserEmail: license.purchaserEmail,
        plan: license.plan,
        status: license.status,
        expiresAt: license.expiresAt,
        twoFactorEnabled: license.twoFactorEnabled,
        recoveryCodesRemaining: license.twoFactorEnabled ? await recoveryCodesRemaining(app.db, license.id) : 0,
        features: entitlementsOf(license),
      };
    },
  );

  app.post(
    '/api/dashboard/totp/setup',
    {
      onRequest: app.requireDashboard,
      schema: {
        operationId: 'setupDashboardTotp',
        tags,
        summary: 'Generate a TOTP secret and its QR code; two-factor is on after POST /api/dashboard/totp/verify',
        description: 'Calling it again before verifying replaces the pending secret.',
        security,
        response: { 200: TotpSetupResult, 401: PlatformError, 409: PlatformError },
      },
    },
    async (request) => {
      const license = request.license!;
      if (license.twoFactorEnabled) stateConflict(new TotpStateError('already_enabled'));
      const setup = await beginTotpSetup(app.db, encryptionKey, license).catch(stateConflict);
      request.log.info({ licenseId: license.id }, 'dashboard totp setup started');
      return setup;
    },
  );

  app.post(
    '/api/dashboard/totp/verify',
    {
      onRequest: [app.requireDashboard, codeLimit],
      schema: {
        operationId: 'verifyDashboardTotp',
        tags,
        summary: 'Confirm a TOTP code and enable two-factor authentication; returns eight recovery codes once',
        security,
        body: TotpCodeBody,
        response: { 200: TotpEnabled, 400: PlatformError, 401: PlatformError, 409: PlatformError, 429: PlatformError },
      },
    },
    async (request) => {
      const licenseId = request.license!.id;
      const codes = await confirmTotpSetup(app.db, encryptionKey, licenseId, request.body.code).catch(stateConflict);
      if (!codes) throw invalidCode();
      request.log.info({ licenseId }, 'dashboard two-factor enabled');
      return { enabled: true as const, recoveryCodes: codes };
    },
  );

  app.post(
    '/api/dashboard/totp/recovery-codes/regenerate',
    {
      onRequest: [app.requireDashboard, codeLimit],
      schema: {
        operationId: 'regenerateDashboardRecoveryCodes',
        tags,
        summary: 'Replace all recovery codes with eight new one-time codes after confirming a live TOTP code',
        description: 'A recovery code is not accepted here. The previous codes stop working.',
        security,
        body: TotpCodeBody,
        response: {
          200: RecoveryCodes,
          400: PlatformError,
          401: PlatformError,
          409: PlatformError,
          429: PlatformError,
        },
      },
    },
    async (request) => {
      const licenseId = request.license!.id;
      const codes = await regenerateRecoveryCodes(app.db, encryptionKey, licenseId, request.body.code).catch(
        stateConflict,
      );
      if (!codes) throw invalidCode();
      request.log.info({ licenseId }, 'dashboard recovery codes regenerated');
      return { recoveryCodes: codes };
    },
  );
};

export default dashboardRoutes;
