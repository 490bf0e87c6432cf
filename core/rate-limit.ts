// Rate limits whose counters live in PostgreSQL, so every api replica shares
// them. One row per (bucket, key); its window opens with the first request
// and the upsert takes the row lock, so concurrent requests count exactly.
import { z } from 'zod';
import { sql, type CommonQueryMethods, type Transactor } from './db/pool.ts';

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
  /** Invitation acceptances and the accept page's forms (each may make an account): per IP. */
  invitationAccept: { bucket: 'invitation-accept', limit: 60, windowMs: 15 * 60_000 },
} satisfies Record<string, RateLimitRule>;

export type RateLimitDecision = { allowed: boolean; remaining: number; retryAfterSeconds: number; resetAt: Date };

/** A window's row: which, how many hits in it, and when it closes. */
export type WindowKey = { bucket: string; key: string };
const Window = z.object({
  bucket: z.string(),
  key: z.string(),
  hits: z.number(),
  reset_at: z.string(),
  /** When the window opened, exactly (a refund names the window it gives back to). */
  started_at: z.string(),
});
export type WindowRow = z.infer<typeof Window>;

const intervalOf = (windowMs: number) => sql.fragment`make_interval(secs => ${windowMs / 1000})`;

/** Counts one hit in each window (a window opens with its first hit, again once it has closed); answers the counts. */
export async function countHits(
  db: CommonQueryMethods,
  windowMs: number,
  keys: readonly WindowKey[],
): Promise<readonly WindowRow[]> {
  const window = intervalOf(windowMs);
  return db.any(sql.type(Window)`
    insert into rate_limit_windows as w (bucket, key, window_start, hits)
    select k.bucket, k.key, now(), 1 from jsonb_to_recordset(${sql.jsonb(keys)}) as k(bucket text, key text)
    order by k.bucket, k.key
    on conflict (bucket, key) do update set
      window_start = case when w.window_start <= now() - ${window} then now() else w.window_start end,
      hits = case when w.window_start <= now() - ${window} then 1 else w.hits + 1 end
    returning w.bucket, w.key, w.hits, (w.window_start + ${window})::text as reset_at, w.window_start::text as started_at`);
}

/** The open windows of these keys, without counting a hit. */
export async function openWindows(
  db: CommonQueryMethods,
  windowMs: number,
  keys: readonly WindowKey[],
): Promise<readonly WindowRow[]> {
  const window = intervalOf(windowMs);
  return db.any(sql.type(Window)`
    select w.bucket, w.key, w.hits, (w.window_start + ${window})::text as reset_at, w.window_start::text as started_at
    from rate_limit_windows w join jsonb_to_recordset(${sql.jsonb(keys)}) as k(bucket text, key text) using (bucket, key)
    where w.window_start > now() - ${window}`);
}

/** A window with the most hits it may hold. */
export type BudgetWindow = WindowKey & { limit: number };
/** A hit counted in every window, or the windows that were full (nothing counted). */
export type Reservation = { counted: readonly WindowRow[] } | { full: readonly WindowRow[] };

/** Advisory lock namespace of the budget windows' keys (two-key locks: apart from the one-key ones). */
const RESERVE_LOCKS = 0x6c6f67; // "log"

/**
 * Counts one hit in every window only when each is below its limit: the
 * check and the count are one step, so a burst of callers (on any replica)
 * never gets past a limit together. The windows' keys are locked for the
 * transaction, always in the same order, so callers queue and never
 * deadlock; the read after the locks sees every earlier caller's count.
 */
export async function reserveHits(
  db: Transactor,
  windowMs: number,
  windows: readonly BudgetWindow[],
): Promise<Reservation> {
  return db.transaction(async (tx) => {
    // In the order of the lock ids, each once: the same order for every caller.
    await tx.query(sql.unsafe`
      select pg_advisory_xact_lock(${RESERVE_LOCKS}, id) from (
        select distinct hashtext(k) as id from unnest(${sql.array(
          windows.map((w) => `${w.bucket}\n${w.key}`),
          'text',
        )}::text[]) k order by id
      ) ids`);
    const open = await openWindows(tx, windowMs, windows);
    const full = open.filter((row) => {
      const limit = windows.find((w) => w.bucket === row.bucket && w.key === row.key)!.limit;
      return row.hits >= limit;
    });
    if (full.length > 0) return { full };
    return { counted: await countHits(tx, windowMs, windows) };
  });
}

/**
 * Gives back a hit reserveHits counted, if its window is still the one it
 * was counted in; a window left with no hits goes, so the next one opens
 * with its next hit.
 */
export async function refundHit(db: CommonQueryMethods, counted: WindowRow): Promise<void> {
  const left = await db.maybeOneFirst(sql.type(z.object({ hits: z.number() }))`
    update rate_limit_windows set hits = hits - 1
    where bucket = ${counted.bucket} and key = ${counted.key} and window_start = ${counted.started_at}::timestamptz and hits > 0
    returning hits`);
  if (left === 0)
    await db.query(sql.unsafe`
      delete from rate_limit_windows where bucket = ${counted.bucket} and key = ${counted.key} and hits = 0`);
}

/** Whole seconds until a window closes (at least 1): a Retry-After. */
export const secondsUntil = (resetAt: string) =>
  Math.max(1, Math.ceil((new Date(resetAt).getTime() - Date.now()) / 1000));

export async function hitRateLimit(
  db: CommonQueryMethods,
  rule: RateLimitRule,
  key: string,
): Promise<RateLimitDecision> {
  const [row] = await countHits(db, rule.windowMs, [{ bucket: rule.bucket, key }]);
  return {
    allowed: row!.hits <= rule.limit,
    remaining: Math.max(0, rule.limit - row!.hits),
    retryAfterSeconds: secondsUntil(row!.reset_at),
    resetAt: new Date(row!.reset_at),
  };
}
