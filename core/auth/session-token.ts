// Short-lived HS256 session tokens for people (platform and dashboard
// logins). Each kind has its own audience and typ, so a token of one kind
// never passes for the other; the subject is the user or license id.
import { createHmac, timingSafeEqual } from 'node:crypto';

export class InvalidTokenError extends Error {
  override name = 'InvalidTokenError';
}

export type SessionKind = 'platform' | 'dashboard';

// HS256 with node:crypto rather than jose: jose goes through WebCrypto, whose
// HMAC is an asynchronous job costing about 150 µs of CPU per verify against
// about 10 µs here, and every authenticated request verifies one. The checks
// are jose's for these tokens: exactly HS256, no `crit`, the signature
// compared in constant time, issuer, audience, a numeric expiry in the future
// and a not-before (when present) in the past. A token jose signs with these
// claims verifies here too: both are plain HS256 JWTs.
const HEADER = Buffer.from(JSON.stringify({ alg: 'HS256', typ: 'JWT' })).toString('base64url');
const SEGMENT = /^[A-Za-z0-9_-]+$/;

const hmac = (secret: Uint8Array, input: string) => createHmac('sha256', secret).update(input).digest();

function decodeSegment(segment: string): Record<string, unknown> | null {
  try {
    const value: unknown = JSON.parse(Buffer.from(segment, 'base64url').toString('utf8'));
    return value !== null && typeof value === 'object' && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : null;
  } catch {
    return null;
  }
}

export async function signSessionToken(
  kind: SessionKind,
  subject: string,
  secret: Uint8Array,
  issuer: string,
  ttlSeconds: number,
): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  const claims = { typ: kind, sub: subject, iss: issuer, aud: kind, iat: now, exp: now + ttlSeconds };
  const input = `${HEADER}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}`;
  return `${input}.${hmac(secret, input).toString('base64url')}`;
}

/** The subject of a valid token of this kind; InvalidTokenError otherwise. */
export async function verifySessionToken(
  kind: SessionKind,
  token: string,
  secret: Uint8Array,
  issuer: string,
): Promise<string> {
  return (await verifySessionTokenClaims(kind, token, secret, issuer)).subject;
}

// Tokens verified before: a client sends the same token with each request
// for its 15 minutes, and the HMAC and parsing of a verify are about a
// tenth of the api's CPU per chat send. The cache is per secret (a token one
// secret verified proves nothing under another) and keyed by the kind, the
// issuer and the token's signed part, which is no secret; the signature is
// compared in constant time, and the expiry is checked on every use. A miss,
// or any difference, goes through the full verification below.
type Verified = { signature: Buffer; subject: string; exp: number };
const verifiedBySecret = new WeakMap<Uint8Array, Map<string, Verified>>();
const MAX_VERIFIED = 10_000;

/** Where a token is remembered: its key (kind, issuer, signed part) and its signature's bytes. */
type Slot = { key: string; signature: Buffer };
function slotOf(kind: SessionKind, token: string, issuer: string): Slot {
  const dot = token.lastIndexOf('.');
  return { key: `${kind}\n${issuer}\n${token.slice(0, dot)}`, signature: Buffer.from(token.slice(dot + 1)) };
}

function verifiedBefore(slot: Slot, secret: Uint8Array): Verified | null {
  const entry = verifiedBySecret.get(secret)?.get(slot.key);
  if (!entry || entry.exp <= Math.floor(Date.now() / 1000)) return null;
  return slot.signature.length === entry.signature.length && timingSafeEqual(slot.signature, entry.signature)
    ? entry
    : null;
}

function remember(slot: Slot, secret: Uint8Array, subject: string, exp: number): void {
  let cache = verifiedBySecret.get(secret);
  if (!cache) {
    cache = new Map();
    verifiedBySecret.set(secret, cache);
  }
  // Oldest first out: a Map iterates in insertion order.
  if (cache.size >= MAX_VERIFIED) cache.delete(cache.keys().next().value!);
  cache.set(slot.key, { signature: slot.signature, subject, exp });
}

/** Why a token is refused when it is not one this service made for this use (one reason: no oracle). */
const NOT_OURS = 'malformed, or not signed by this service';

/** Subject and expiry of a valid token (long-lived connections close at the expiry). */
export async function verifySessionTokenClaims(
  kind: SessionKind,
  token: string,
  secret: Uint8Array,
  issuer: string,
): Promise<{ subject: string; expiresAt: Date }> {
  const slot = slotOf(kind, token, issuer);
  const known = verifiedBefore(slot, secret);
  if (known) return { subject: known.subject, expiresAt: new Date(known.exp * 1000) };
  const parts = token.split('.');
  if (parts.length !== 3 || !parts.every((part) => SEGMENT.test(part))) throw new InvalidTokenError(NOT_OURS);
  const [header, payload, signature] = parts as [string, string, string];
  // The signature first: nothing of an unsigned token is parsed.
  const expected = hmac(secret, `${header}.${payload}`);
  const given = Buffer.from(signature, 'base64url');
  if (
    given.length !== expected.length ||
    !timingSafeEqual(given, expected) ||
    given.toString('base64url') !== signature
  ) {
    throw new InvalidTokenError(NOT_OURS);
  }
  const protectedHeader = decodeSegment(header);
  if (protectedHeader?.alg !== 'HS256' || 'crit' in protectedHeader || 'b64' in protectedHeader)
    throw new InvalidTokenError(NOT_OURS);
  const claims = decodeSegment(payload);
  if (!claims) throw new InvalidTokenError(NOT_OURS);
  const now = Math.floor(Date.now() / 1000);
  const audience = Array.isArray(claims.aud) ? claims.aud : [claims.aud];
  if (claims.iss !== issuer || !audience.includes(kind)) throw new InvalidTokenError(NOT_OURS);
  if (typeof claims.exp !== 'number' || !Number.isFinite(claims.exp)) throw new InvalidTokenError(NOT_OURS);
  if (claims.exp <= now) throw new InvalidTokenError('expired');
  if (claims.nbf !== undefined && (typeof claims.nbf !== 'number' || claims.nbf > now))
    throw new InvalidTokenError(NOT_OURS);
  if (claims.iat !== undefined && typeof claims.iat !== 'number') throw new InvalidTokenError(NOT_OURS);
  if (typeof claims.sub !== 'string' || claims.typ !== kind) throw new InvalidTokenError('no subject of this kind');
  remember(slot, secret, claims.sub, claims.exp);
  return { subject: claims.sub, expiresAt: new Date(claims.exp * 1000) };
}

/** Extracts the credential of an `Authorization: Bearer <token>` header. */
export function bearerToken(header: string | undefined): string | null {
  if (!header) return null;
  const match = /^Bearer\s+([A-Za-z0-9\-._~+/]+=*)\s*$/i.exec(header);
  return match ? match[1]! : null;
}
