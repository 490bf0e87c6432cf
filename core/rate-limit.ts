// Rate limits whose counters live in PostgreSQL, so every api replica shares
// them. One row per (bucket, key); its window opens with the first request
// and the upsert takes the row lock, so concurrent requests count exactly.
import { z } from 'zod';
import { sql, type CommonQueryMethods } from './db/pool.ts';

export type RateLimitRule = { bucket: string; limit: number; windowMs: number };

/** The limits of the spec's Limits table. */
export const LIMITS = {
  /** Starts and callbacks of external logins (OpenID Connect): per IP. Password and code logins count failures instead (accounts/login-throttle.ts). */
  externalLogin: { bucket: 'external-login', limit: 60, windowMs: 15 * 60_000 },
  /** A signed-in dashboard license confirming a TOTP code: per license. */
  secondFactorCheck: { bucket: 'second-factor-check', limit: 10, windowMs: 15 * 60_000 },
  contact: { bucket: 'contact', limit: 5, windowMs: 15 * 60_000 },
  tracking: { bucket: 'tracking', limit: 30, windowMs: 60_000 },
  /** New agent registrations (each makes a workspace): per IP. */
  agentRegistration: { bucket: 'agent-registration', limit: 20, windowMs: 60 * 60_000 },
} satisfies Record<string, RateLimitRule>;

export type RateLimitDecision = { allowed: boolean; remaining: number; retryAfterSeconds: number; resetAt: Date };

const Hit = z.object({ hits: z.number(), reset_at: z.string() });

export async function hitRateLimit(db: CommonQueryMethods, rule: RateLimitRule, key: string): Promise<RateLimitDecision> {
  const window = sql.fragment`make_interval(secs => ${rule.windowMs / 1000})`;
  const row = await db.one(sql.type(Hit)`
    insert into rate_limit_windows as w (bucket, key, window_start, hits)
    values (${rule.bucket}, ${key}, now(), 1)
    on conflict (bucket, key) do update set
      window_start = case when w.window_start <= now() - ${window} then now() else w.window_start end,
      hits = case when w.window_start <= now() - ${window} then 1 else w.hits + 1 end
    returning hits, window_start + ${window} as reset_at`);
  const resetAt = new Date(row.reset_at);
  return {
    allowed: row.hits <= rule.limit,
    remaining: Math.max(0, rule.limit - row.hits),
    retryAfterSeconds: Math.max(1, Math.ceil((resetAt.getTime() - Date.now()) / 1000)),
    resetAt,
  };
}
