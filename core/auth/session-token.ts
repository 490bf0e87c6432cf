// Short-lived HS256 session tokens for people (platform and dashboard
// logins). Each kind has its own audience and typ, so a token of one kind
// never passes for the other; the subject is the user or license id.
import { errors as joseErrors, jwtVerify, SignJWT } from 'jose';

export class InvalidTokenError extends Error {
  override name = 'InvalidTokenError';
}

export type SessionKind = 'platform' | 'dashboard';

// jose imports a raw secret as a WebCrypto key on every call (about half of
// a verify's CPU); the secret is fixed for the process, so import it once.
const hmacKeys = new WeakMap<Uint8Array, Map<KeyUsage, Promise<CryptoKey>>>();

function hmacKey(secret: Uint8Array, usage: 'sign' | 'verify'): Promise<CryptoKey> {
  let keys = hmacKeys.get(secret);
  if (!keys) hmacKeys.set(secret, (keys = new Map()));
  let key = keys.get(usage);
  if (!key) keys.set(usage, (key = crypto.subtle.importKey('raw', secret as BufferSource, { name: 'HMAC', hash: 'SHA-256' }, false, [usage])));
  return key;
}

export async function signSessionToken(kind: SessionKind, subject: string, secret: Uint8Array, issuer: string, ttlSeconds: number): Promise<string> {
  return new SignJWT({ typ: kind })
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .setSubject(subject)
    .setIssuer(issuer)
    .setAudience(kind)
    .setIssuedAt()
    .setExpirationTime(`${ttlSeconds}s`)
    .sign(await hmacKey(secret, 'sign'));
}

/** The subject of a valid token of this kind; InvalidTokenError otherwise. */
export async function verifySessionToken(kind: SessionKind, token: string, secret: Uint8Array, issuer: string): Promise<string> {
  return (await verifySessionTokenClaims(kind, token, secret, issuer)).subject;
}

/** Subject and expiry of a valid token (long-lived connections close at the expiry). */
export async function verifySessionTokenClaims(kind: SessionKind, token: string, secret: Uint8Array, issuer: string): Promise<{ subject: string; expiresAt: Date }> {
  try {
    const { payload } = await jwtVerify(token, await hmacKey(secret, 'verify'), { algorithms: ['HS256'], issuer, audience: kind, requiredClaims: ['exp'] });
    if (typeof payload.sub !== 'string' || payload.typ !== kind) throw new InvalidTokenError('token has no subject');
    return { subject: payload.sub, expiresAt: new Date(payload.exp! * 1000) };
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
