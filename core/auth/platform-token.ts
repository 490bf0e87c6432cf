// Platform JWTs (the "JWT" of the spec's Auth column): HS256 with
// PLATFORM_JWT_SECRET, issued to people after login. Short-lived by design;
// the accounts area decides how a client renews one.
import { jwtVerify, SignJWT, errors as joseErrors } from 'jose';

export const PLATFORM_AUDIENCE = 'platform';
export const DEFAULT_PLATFORM_TOKEN_TTL_S = 15 * 60;

export type PlatformPrincipal = { userId: string };

export async function signPlatformToken(
  principal: PlatformPrincipal,
  secret: Uint8Array,
  issuer: string,
  ttlSeconds = DEFAULT_PLATFORM_TOKEN_TTL_S,
): Promise<string> {
  return new SignJWT({ typ: 'platform' })
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .setSubject(principal.userId)
    .setIssuer(issuer)
    .setAudience(PLATFORM_AUDIENCE)
    .setIssuedAt()
    .setExpirationTime(`${ttlSeconds}s`)
    .sign(secret);
}

export class InvalidTokenError extends Error {
  override name = 'InvalidTokenError';
}

export async function verifyPlatformToken(token: string, secret: Uint8Array, issuer: string): Promise<PlatformPrincipal> {
  try {
    const { payload } = await jwtVerify(token, secret, {
      algorithms: ['HS256'],
      issuer,
      audience: PLATFORM_AUDIENCE,
    });
    if (typeof payload.sub !== 'string' || payload.typ !== 'platform') throw new InvalidTokenError('token has no subject');
    return { userId: payload.sub };
  } catch (error) {
    if (error instanceof InvalidTokenError) throw error;
    if (error instanceof joseErrors.JWTExpired) throw new InvalidTokenError('token expired');
    throw new InvalidTokenError('token invalid');
  }
}

/** Extracts the credential of an `Authorization: Bearer <token>` header. */
export function bearerToken(header: string | undefined): string | null {
  if (!header) return null;
  const match = /^Bearer\s+([A-Za-z0-9\-._~+/]+=*)\s*$/i.exec(header);
  return match ? match[1]! : null;
}
