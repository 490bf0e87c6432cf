// Platform JWTs (the "JWT" of the spec's Auth column), issued to people at
// login: 15 minutes, renewed with a refresh token (core/accounts).
import { signSessionToken, verifySessionToken } from './session-token.ts';

export { bearerToken, InvalidTokenError } from './session-token.ts';

export const DEFAULT_PLATFORM_TOKEN_TTL_S = 15 * 60;

export type PlatformPrincipal = { userId: string };

export async function signPlatformToken(principal: PlatformPrincipal, secret: Uint8Array, issuer: string, ttlSeconds = DEFAULT_PLATFORM_TOKEN_TTL_S): Promise<string> {
  return signSessionToken('platform', principal.userId, secret, issuer, ttlSeconds);
}

export async function verifyPlatformToken(token: string, secret: Uint8Array, issuer: string): Promise<PlatformPrincipal> {
  return { userId: await verifySessionToken('platform', token, secret, issuer) };
}
