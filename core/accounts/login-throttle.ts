// The login budget, after OWASP's authentication guidance: only failures
// count. A wrong password (or second factor) counts against the account it
// was for and against the client's address; a correct one spends nothing and
// clears its account's count. An account locks after LOGIN_FAILURES_PER_ACCOUNT
// failures in LOGIN_LOCKOUT_MINUTES (guessing one person's password), an
// address after LOGIN_FAILURES_PER_ADDRESS (trying many accounts), a much
// higher bound so an office behind one address is not locked out by one
// person's typos. Counts live in rate_limit_windows, shared by every api
// replica; `npm run login:unlock` lifts a lockout. The bounds are settings
// (LOGIN_*, core/config/groups/logins.ts), read here from config.loginThrottle.
import { createHash } from 'node:crypto';
import { sql, type CommonQueryMethods } from '../db/pool.ts';
import { countHits, openWindows, secondsUntil, type WindowKey } from '../rate-limit.ts';

export type LoginThrottleSettings = { perAccount: number; perAddress: number; windowMs: number };

const ACCOUNT_BUCKET = 'login-failures-account';
const ADDRESS_BUCKET = 'login-failures-address';

/**
 * Who an attempt was for: a person's e-mail (`login` for passwords,
 * `dashboard` for a license's second factor), or nobody when the attempt
 * names no account (a license key). Kept as a digest: the table never holds
 * an address someone typed.
 */
export type LoginSubject = { account: { kind: 'login' | 'dashboard'; email: string } | null; address: string };

export const accountKey = (account: { kind: string; email: string }) =>
  `${account.kind}:${createHash('sha256').update(account.email.trim().toLowerCase()).digest('hex')}`;

export type Lockout = { scope: 'account' | 'address'; retryAfterSeconds: number };

/** The failure counts an attempt is checked against and counted in: its address's, and its account's when it names one. */
const windowsOf = (subject: LoginSubject): WindowKey[] => [
  { bucket: ADDRESS_BUCKET, key: subject.address },
  ...(subject.account ? [{ bucket: ACCOUNT_BUCKET, key: accountKey(subject.account) }] : []),
];

/** Whether the attempt may go ahead: null, or the lockout that stands (the later one when both do). */
export async function loginLockout(
  db: CommonQueryMethods,
  settings: LoginThrottleSettings,
  subject: LoginSubject,
): Promise<Lockout | null> {
  let lockout: Lockout | null = null;
  for (const row of await openWindows(db, settings.windowMs, windowsOf(subject))) {
    const limit = row.bucket === ACCOUNT_BUCKET ? settings.perAccount : settings.perAddress;
    if (row.hits < limit) continue;
    const retryAfterSeconds = secondsUntil(row.reset_at);
    if (!lockout || retryAfterSeconds > lockout.retryAfterSeconds)
      lockout = { scope: row.bucket === ACCOUNT_BUCKET ? 'account' : 'address', retryAfterSeconds };
  }
  return lockout;
}

/** Counts a failed attempt against its account and its address (a window opens with its first failure). */
export async function recordLoginFailure(
  db: CommonQueryMethods,
  settings: LoginThrottleSettings,
  subject: LoginSubject,
): Promise<void> {
  await countHits(db, settings.windowMs, windowsOf(subject));
}

/** A correct login clears its account's failures (its address keeps its count: it may be trying many accounts). */
export async function clearAccountFailures(
  db: CommonQueryMethods,
  account: { kind: 'login' | 'dashboard'; email: string },
): Promise<void> {
  await db.query(
    sql.unsafe`delete from rate_limit_windows where bucket = ${ACCOUNT_BUCKET} and key = ${accountKey(account)}`,
  );
}

/** Lifts lockouts by hand: an e-mail's (password and dashboard logins) and/or an address's. Answers how many counts were cleared. */
export async function liftLockout(
  db: CommonQueryMethods,
  target: { email?: string; address?: string },
): Promise<number> {
  const keys = [
    ...(target.email
      ? (['login', 'dashboard'] as const).map((kind) => ({
          bucket: ACCOUNT_BUCKET,
          key: accountKey({ kind, email: target.email! }),
        }))
      : []),
    ...(target.address ? [{ bucket: ADDRESS_BUCKET, key: target.address }] : []),
  ];
  const result = await db.query(sql.unsafe`
    delete from rate_limit_windows w using jsonb_to_recordset(${sql.jsonb(keys)}) as k(bucket text, key text)
    where w.bucket = k.bucket and w.key = k.key`);
  return result.rowCount;
}

export type LoginOutcome<T> = { ok: T } | { failed: true } | { locked: Lockout };

/**
 * One login attempt under the budget: refused while a lockout stands (the
 * attempt is not even checked), counted when `attempt` answers null, and
 * clearing its account's count when it succeeds.
 */
export async function throttledLogin<T>(
  db: CommonQueryMethods,
  settings: LoginThrottleSettings,
  subject: LoginSubject,
  attempt: () => Promise<T | null>,
): Promise<LoginOutcome<T>> {
  const locked = await loginLockout(db, settings, subject);
  if (locked) return { locked };
  const result = await attempt();
  if (result === null) {
    await recordLoginFailure(db, settings, subject);
    return { failed: true };
  }
  if (subject.account) await clearAccountFailures(db, subject.account);
  return { ok: result };
}

/** What a locked-out person reads: why, and when to try again (in minutes and as a UTC time). */
export function lockoutMessage(
  lockout: Lockout,
  accountFailures = 'wrong passwords for this account',
  now = Date.now(),
): string {
  const minutes = Math.ceil(lockout.retryAfterSeconds / 60);
  const at = new Date(now + lockout.retryAfterSeconds * 1000).toISOString().slice(11, 16);
  const why =
    lockout.scope === 'account' ? `Too many ${accountFailures}` : 'Too many failed sign-ins from your network address';
  return `${why}; try again in ${minutes} minute${minutes === 1 ? '' : 's'} (at ${at} UTC).`;
}
