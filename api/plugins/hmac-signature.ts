// "HMAC + Auth" (spec, Platform authentication 4): a route that changes a
// secret takes the platform JWT AND an HMAC-SHA256 signature over the method,
// path, tenant, a timestamp and the exact body bytes.
//
// Which key signs: a per-user signing key the server derives,
//   HMAC-SHA256(PLATFORM_JWT_SECRET, "provider-key-signing:v1:<userId>:<day>")
// (day = unix time / 86400), handed out by GET /api/provider-keys/signing-key.
// Why not sha256(bearer token): that is computable by anyone who sees the
// request, so it would add nothing over the token. The signing key never
// travels with the requests it signs, so a copy of a signed request (a proxy
// or access log that keeps headers, a HAR file, an error report) can neither
// be replayed (timestamp window + remembered signatures) nor re-signed with
// another body or tenant. Deriving it needs no table and agrees on every
// replica; the day in the derivation bounds a leaked signing key to two days
// without any stored state. Domain separation: the derivation input contains
// ':' which never occurs in a JWT signing input, so this HMAC can never yield
// a valid JWT signature and vice versa. What it does not do: a thief holding
// a live bearer token can fetch a signing key too; the signature protects
// the request, the token protects the session.
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { z } from 'zod';
import { sql } from '../../core/db/pool.ts';
import { PlatformHttpError } from '../errors.ts';

// The scheme is documented for users in docs/chat-and-models.md ("Signed requests").

export const SIGNATURE_TOLERANCE_S = 300;
const KEY_EPOCH_S = 86_400;
/**
 * A signature first seen at r has a timestamp >= r - tolerance, so it stops
 * being acceptable by r + 2 x tolerance; a minute more covers clock skew
 * between the api replicas and the database.
 */
const SEEN_RETENTION_S = 2 * SIGNATURE_TOLERANCE_S + 60;

declare module 'fastify' {
  interface FastifyRequest {
    /** The exact body bytes, kept by `keepRawJsonBody` in contexts that verify signatures. */
    rawBody?: Buffer;
  }
  interface FastifyInstance {
    requireSignature: (request: FastifyRequest) => Promise<void>;
  }
}

/** Optional in the schema (so they are documented); their absence is the preHandler's 401, not a 400. */
export const SignatureHeaders = z.object({
  'x-signature-timestamp': z.string().optional().describe('Unix seconds when the request was signed (HMAC + Auth)'),
  'x-signature': z
    .string()
    .optional()
    .describe('`v1=<hex HMAC-SHA256>` of METHOD\\npath\\nx-tenant-id\\ntimestamp\\nsha256hex(body) (HMAC + Auth)'),
});

export function deriveSigningKey(secret: Buffer, userId: string, epoch: number): string {
  return `pks_${createHmac('sha256', secret).update(`provider-key-signing:v1:${userId}:${epoch}`).digest('base64url')}`;
}

/** The key to hand out now and when it stops being accepted (end of the next day). */
export function issueSigningKey(secret: Buffer, userId: string, nowMs = Date.now()) {
  const epoch = Math.floor(nowMs / 1000 / KEY_EPOCH_S);
  return {
    signingKey: deriveSigningKey(secret, userId, epoch),
    expiresAt: new Date((epoch + 2) * KEY_EPOCH_S * 1000).toISOString(),
  };
}

const sha256Hex = (body: Buffer | string) => createHash('sha256').update(body).digest('hex');

export function stringToSign(
  method: string,
  path: string,
  tenantId: string,
  timestamp: string,
  body: Buffer | string = '',
): string {
  return [method.toUpperCase(), path, tenantId, timestamp, sha256Hex(body)].join('\n');
}

/** Client side of the scheme (tests and SDKs): the two headers for a request. */
export function signRequest(
  signingKey: string,
  method: string,
  path: string,
  tenantId: string,
  body: Buffer | string = '',
  nowMs = Date.now(),
) {
  const timestamp = String(Math.floor(nowMs / 1000));
  const mac = createHmac('sha256', signingKey)
    .update(stringToSign(method, path, tenantId, timestamp, body))
    .digest('hex');
  return { 'x-signature-timestamp': timestamp, 'x-signature': `v1=${mac}` };
}

/**
 * Registers, in the calling (encapsulated) context only, a JSON parser that
 * keeps the raw bytes for the signature and refuses every other content
 * type, so what was signed is exactly what was parsed.
 */
export function keepRawJsonBody(app: FastifyInstance) {
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
    const bytes = body as Buffer;
    request.rawBody = bytes;
    if (bytes.length === 0) return done(null, undefined); // a DELETE may carry the header without a body
    // Fastify's own parser answers through done (its type also allows a promise).
    void parseJson(request, bytes.toString('utf8'), done);
  });
}

const refuse = (code: string, message: string) =>
  new PlatformHttpError(401, code, message, { 'www-authenticate': 'HMAC-SHA256 realm="provider-keys"' });

const TIMESTAMP = /^\d{1,12}$/;
const SIGNATURE = /^v1=([0-9a-f]{64})$/;

async function hmacSignature(app: FastifyInstance) {
  const secret = app.config.secrets.PLATFORM_JWT_SECRET;

  app.decorateRequest('rawBody', undefined);
  // Use after onRequest: app.requireUser and preValidation: app.requireTenant(...).
  app.decorate('requireSignature', async (request: FastifyRequest) => {
    if (!request.user || !request.tenant) throw new Error('requireSignature runs after requireUser and requireTenant');
    const timestamp = request.headers['x-signature-timestamp'];
    const signature = request.headers['x-signature'];
    if (typeof timestamp !== 'string' || typeof signature !== 'string') {
      throw refuse(
        'signature_required',
        'Sign this request: send x-signature-timestamp and x-signature (see GET /api/provider-keys/signing-key).',
      );
    }
    const given = SIGNATURE.exec(signature.trim().toLowerCase());
    if (!TIMESTAMP.test(timestamp) || !given) {
      throw refuse(
        'invalid_signature',
        'x-signature-timestamp must be unix seconds and x-signature `v1=<64 hex digits>`.',
      );
    }
    const nowS = Math.floor(Date.now() / 1000);
    if (Math.abs(nowS - Number(timestamp)) > SIGNATURE_TOLERANCE_S) {
      throw refuse(
        'signature_expired',
        `The signature timestamp is more than ${SIGNATURE_TOLERANCE_S} s from the server clock; sign again now.`,
      );
    }

    const tenantHeader = String(request.headers['x-tenant-id'] ?? '');
    const signed = stringToSign(
      request.method,
      request.url,
      tenantHeader,
      timestamp,
      request.rawBody ?? Buffer.alloc(0),
    );
    const presented = Buffer.from(given[1]!, 'hex');
    // Today's key and yesterday's, so a key fetched late in a day keeps working.
    const epoch = Math.floor(nowS / KEY_EPOCH_S);
    let valid = false;
    for (const e of [epoch, epoch - 1]) {
      const expected = createHmac('sha256', deriveSigningKey(secret, request.user.userId, e))
        .update(signed)
        .digest();
      valid = timingSafeEqual(expected, presented) || valid;
    }
    if (!valid) throw refuse('invalid_signature', 'The signature does not match this request.');

    // Remembered in PostgreSQL so every replica refuses the same signature;
    // kept for longer than its timestamp stays acceptable.
    const { rowCount } = await app.db.query(sql.unsafe`
      insert into hmac_seen_signatures (tenant_id, signature, expires_at)
      values (${request.tenant.id}, ${given[1]!}, now() + make_interval(secs => ${SEEN_RETENTION_S}))
      on conflict (tenant_id, signature) do nothing`);
    if (rowCount === 0) throw refuse('signature_replayed', 'This signature was already used; sign each request anew.');
  });
}

export default fp(hmacSignature, { name: 'hmac-signature', dependencies: ['platform-auth'] });
