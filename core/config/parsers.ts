// The zod building blocks settings are declared with. Each parses one
// environment value (a non-empty string: empty ones count as unset) and says
// in its message what a good value looks like, since the message is all an
// operator sees when a process refuses to start.
import { z } from 'zod';
import { PLAN_NAMES, type PlanName } from '../plans.ts';
import type { PlanValues } from '../jobs/plan-limits.ts';

export const boolFromEnv = z
  .enum(['true', 'false', '1', '0', 'yes', 'no'])
  .transform((v) => v === 'true' || v === '1' || v === 'yes');

export const intFromEnv = (min: number, max: number) => z.coerce.number().int().min(min).max(max);

export const nonEmpty = z.string().min(1);

/** An http(s) URL without its trailing slashes, so paths can be appended to it. */
export const urlFromEnv = z.url({ protocol: /^https?$/ }).transform((v) => v.replace(/\/+$/, ''));

export const postgresUrl = z
  .string()
  .regex(/^postgres(ql)?:\/\//, 'must be a postgres:// or postgresql:// connection string');

/** A comma-separated list; blanks between commas are dropped. */
export const commaList = z.string().transform((v) =>
  v
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean),
);

/** Browser origins compared exactly with the Origin header, so nothing may follow host[:port]. */
export const corsOrigins = commaList.pipe(
  z.array(
    z
      .url({ protocol: /^https?$/ })
      .transform((o) => o.replace(/\/+$/, ''))
      .refine((o) => new URL(o).origin === o, 'each origin is scheme://host[:port], no path'),
  ),
);

// Secrets: 32 random bytes, base64 or base64url. Checked for length so a typo
// such as a short password never becomes a signing key.
export const secret32 = z.string().transform((v, ctx) => {
  const buf = Buffer.from(v, 'base64');
  if (buf.length !== 32) {
    ctx.addIssue({ code: 'custom', message: 'must be 32 bytes encoded as base64 (openssl rand -base64 32)' });
    return z.NEVER;
  }
  return buf;
});

export const smtpUrl = z
  .string()
  .trim()
  .refine((v) => {
    try {
      return ['smtp:', 'smtps:'].includes(new URL(v).protocol);
    } catch {
      return false;
    }
  }, 'must be an smtp:// or smtps:// URL, e.g. smtp://user:password@mail.example.com:587');

const isLoopback = (host: string) => host === 'localhost' || host === '[::1]' || /^127\.\d+\.\d+\.\d+$/.test(host);

/** https, or http on a loopback address (a provider running next to us, as in tests). */
export const issuerUrl = z
  .url()
  .transform((v) => v.replace(/\/+$/, ''))
  .refine((v) => {
    const url = new URL(v);
    return (
      !url.search && !url.hash && (url.protocol === 'https:' || (url.protocol === 'http:' && isLoopback(url.hostname)))
    );
  }, 'must be an https:// issuer URL without query (http:// only on a loopback address)');

/** A private JWK (JSON) for private_key_jwt client authentication. */
export const privateJwk = z.string().transform((v, ctx) => {
  try {
    const jwk = JSON.parse(v) as Record<string, unknown>;
    if (typeof jwk === 'object' && jwk && typeof jwk.kty === 'string' && typeof jwk.d === 'string') return jwk;
  } catch {
    // reported below
  }
  ctx.addIssue({ code: 'custom', message: 'must be a private JWK as JSON ({"kty":...,"d":...,"kid":...})' });
  return z.NEVER;
});

/** Redirect URIs: absolute http(s) URLs without query or fragment (the code exchange sends them bare). */
export const redirectUris = commaList.pipe(
  z.array(
    z.url({ protocol: /^https?$/ }).refine((u) => !new URL(u).search && !new URL(u).hash, 'no query or fragment'),
  ),
);

/** OAuth scope names (RFC 6749's scope-token characters), one space between them. */
export const oauthScopes = z
  .string()
  .regex(/^[\x21\x23-\x5b\x5d-\x7e]+( [\x21\x23-\x5b\x5d-\x7e]+)*$/, 'space-separated scope names');

/** "free=1,pro=4,enterprise=16": a value per plan (plans left out keep theirs). */
export const planValues = (value: z.ZodNumber) =>
  z.string().transform((raw, ctx) => {
    const out: PlanValues = {};
    for (const part of raw
      .split(',')
      .map((p) => p.trim())
      .filter(Boolean)) {
      const [name, text] = part.split('=').map((x) => x.trim());
      const parsed = value.safeParse(Number(text));
      if (!(PLAN_NAMES as readonly string[]).includes(name ?? '') || text === undefined || !parsed.success) {
        ctx.addIssue({
          code: 'custom',
          message: `expected plan=value pairs such as "free=1,pro=4,enterprise=16" (plans: ${PLAN_NAMES.join(', ')}); "${part}" is not one`,
        });
        return z.NEVER;
      }
      out[name as PlanName] = parsed.data;
    }
    return out;
  });
