// What the partner and altidp routes share: the 503 of a provider that is
// not configured, provider errors in the platform shape, and the login
// itself (link or create the account, issue the refresh token: one commit).
import type { FastifyInstance } from 'fastify';
import type { JWTPayload } from 'jose';
import { issueRefreshToken } from '../../../core/accounts/refresh-tokens.ts';
import { signInExternal, verifiedFlag, type ExternalSignIn } from '../../../core/external-login/accounts.ts';
import { ExternalLoginError } from '../../../core/external-login/clients.ts';
import { missingSettings, type ExternalProvider, type LoginKind } from '../../../core/external-login/settings.ts';
import { storableText } from '../../../core/storable.ts';
import { PlatformHttpError } from '../../errors.ts';
import { sessionPayload } from './session.ts';

export function requireConfigured(app: FastifyInstance, kind: LoginKind): void {
  const missing = missingSettings(app.config.externalLogin, kind);
  if (missing.length > 0) {
    throw new PlatformHttpError(
      503,
      'auth_method_disabled',
      `This login is not configured on this deployment; the operator sets ${missing.join(', ')}.`,
    );
  }
}

/** Runs a provider step; its ExternalLoginError becomes the platform error. */
export async function viaProvider<T>(step: () => Promise<T>): Promise<T> {
  try {
    return await step();
  } catch (error) {
    if (error instanceof ExternalLoginError) throw new PlatformHttpError(error.status, error.code, error.message);
    throw error;
  }
}

/** Who the provider says the person is; a name is made storable (a NUL in it would fail the sign-in). */
export function claimsOf(provider: ExternalProvider, payload: JWTPayload, name?: string) {
  const given = [payload.given_name, payload.family_name].filter((v) => typeof v === 'string' && v).join(' ');
  const named = name ?? (typeof payload.name === 'string' && payload.name ? payload.name : given || undefined);
  return {
    provider,
    subject: String(payload.sub),
    email: typeof payload.email === 'string' && payload.email ? payload.email : undefined,
    emailVerified: verifiedFlag(payload.email_verified),
    name: named === undefined ? undefined : storableText(named) || undefined,
  };
}

/**
 * The subject and e-mail identify the person, so they are never mended (two
 * could become one): an answer whose subject or e-mail PostgreSQL cannot
 * store is refused.
 */
export function assertStorableIdentity(claims: ReturnType<typeof claimsOf>): void {
  const { subject, email } = claims;
  if (storableText(subject) === subject && (email === undefined || storableText(email) === email)) return;
  throw new ExternalLoginError(
    502,
    'provider_unavailable',
    "The provider's answer is not usable (its subject or e-mail holds a NUL or a lone surrogate).",
  );
}

/** Signs the person in (linking rule in core/external-login/accounts.ts) and answers the login payload. */
export async function externalLogin(app: FastifyInstance, claims: ReturnType<typeof claimsOf>) {
  const { result, refreshToken } = await viaProvider(() => {
    assertStorableIdentity(claims);
    return app.db.transaction(async (tx) => {
      const result: ExternalSignIn = await signInExternal(tx, claims);
      return { result, refreshToken: await issueRefreshToken(tx, result.user.id) };
    });
  });
  app.log.info(
    { provider: claims.provider, userId: result.user.id, newUser: result.newUser, linked: result.linked },
    'external login',
  );
  return { ...(await sessionPayload(app, result.user, refreshToken)), newUser: result.newUser };
}
