// Dashboard JWTs: what a license key (plus TOTP when enabled) is exchanged
// for. The subject is the license id; 15 minutes, then log in again.
import { signSessionToken, verifySessionToken } from './session-token.ts';

export { bearerToken, InvalidTokenError } from './session-token.ts';

export const DASHBOARD_TOKEN_TTL_S = 15 * 60;

export type DashboardPrincipal = { licenseId: string };

export async function signDashboardToken(
  principal: DashboardPrincipal,
  secret: Uint8Array,
  issuer: string,
  ttlSeconds = DASHBOARD_TOKEN_TTL_S,
): Promise<string> {
  return signSessionToken('dashboard', principal.licenseId, secret, issuer, ttlSeconds);
}

export async function verifyDashboardToken(
  token: string,
  secret: Uint8Array,
  issuer: string,
): Promise<DashboardPrincipal> {
  return { licenseId: await verifySessionToken('dashboard', token, secret, issuer) };
}
