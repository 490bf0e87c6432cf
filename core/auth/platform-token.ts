// Platform JWTs (the "JWT" of the spec's Auth column), issued to people at
// login: 15 minutes, renewed with a refresh token (core/accounts).
import { signSessionToken, verifySessionTokenClaims } from './session-token.ts';

export { bearerToken, InvalidTokenError } from './session-token.ts';

export const DEFAULT_PLATFORM_TOKEN_TTL_S = 15 * 60;

export type PlatformPrincipal = { userId: string };

export async function signPlatformToken(
  principal: PlatformPrincipal,
  secret: Uint8Array,
  issuer: string,
  ttlSeconds = DEFAULT_PLATFORM_TOKEN_TTL_S,
): Promise<string> {
  return signSessionToken('platform', principal.userId, secret, issuer, ttlSeconds);
}

/** The principal, and when its token expires (websockets close then). */
export type VerifiedPlatformToken = PlatformPrincipal & { expiresAt: Date };

export async function verifyPlatformToken(
  token: string,
  secret: Uint8Array,
  issuer: string,
): Promise<VerifiedPlatformToken> {
  const { subject, expiresAt } = await verifySessionTokenClaims('platform', token, secret, issuer);
  return { userId: subject, expiresAt };
}
