// Dashboard JWTs: what a license key (plus TOTP when enabled) is exchanged
// for. HS256 with PLATFORM_JWT_SECRET like platform tokens, but audience
// `dashboard` and typ `dashboard`, so neither kind passes for the other.
// The subject is the license id; 15 minutes, then log in again.
import { jwtVerify, SignJWT, errors as joseErrors } from 'jose';
import { InvalidTokenError } from './platform-token.ts';

export { bearerToken, InvalidTokenError } from './platform-token.ts';

export const DASHBOARD_AUDIENCE = 'dashboard';
export const DASHBOARD_TOKEN_TTL_S = 15 * 60;

export type DashboardPrincipal = { licenseId: string };

export async function signDashboardToken(
  principal: DashboardPrincipal,
  secret: Uint8Array,
  issuer: string,
  ttlSeconds = DASHBOARD_TOKEN_TTL_S,
): Promise<string> {
  return new SignJWT({ typ: 'dashboard' })
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .setSubject(principal.licenseId)
    .setIssuer(issuer)
    .setAudience(DASHBOARD_AUDIENCE)
    .setIssuedAt()
    .setExpirationTime(`${ttlSeconds}s`)
    .sign(secret);
}

export async function verifyDashboardToken(token: string, secret: Uint8Array, issuer: string): Promise<DashboardPrincipal> {
  try {
    const { payload } = await jwtVerify(token, secret, { algorithms: ['HS256'], issuer, audience: DASHBOARD_AUDIENCE });
    if (typeof payload.sub !== 'string' || payload.typ !== 'dashboard') throw new InvalidTokenError('token has no subject');
    return { licenseId: payload.sub };
  } catch (error) {
    if (error instanceof InvalidTokenError) throw error;
    if (error instanceof joseErrors.JWTExpired) throw new InvalidTokenError('token expired');
    throw new InvalidTokenError('token invalid');
  }
}
