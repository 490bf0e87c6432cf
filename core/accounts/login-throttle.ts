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
//
// An attempt reserves its failure before its password is checked (the check
// against the bounds and the count are one step in PostgreSQL), and a correct
// password gives it back: a burst of concurrent guesses, on any number of
// replicas, gets no more checks than the budget. An account is keyed by its
// canonical address (core/accounts/email.ts), the same one its lookup uses.
import { createHash } from 'node:crypto';
import { sql, type CommonQueryMethods, type Transactor } from '../db/pool.ts';
import { refundHit, reserveHits, secondsUntil, type BudgetWindow, type WindowRow } from '../rate-limit.ts';
import { canonicalEmail } from './email.ts';

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

/** An account's key in the budget, or null for an address canonicalEmail refuses (no account has it). */
export const accountKey = (account: { kind: string; email: string }): string | null => {
  const email = canonicalEmail(account.email);
  return email ? `${account.kind}:${createHash('sha256').update(email).digest('hex')}` : null;
};

export type Lockout = { scope: 'account' | 'address'; retryAfterSeconds: number };

/** The failure counts an attempt is checked against and counted in: its address's, and its account's when it names one. */
const windowsOf = (settings: LoginThrottleSettings, subject: LoginSubject, key: string | null): BudgetWindow[] => [
  { bucket: ADDRESS_BUCKET, key: subject.address, limit: settings.perAddress },
  ...(key ? [{ bucket: ACCOUNT_BUCKET, key, limit: settings.perAccount }] : []),
];

/** The lockout that full windows make (the later one when both are full). */
const lockoutOf = (full: readonly WindowRow[]): Lockout =>
  full
    .map(
      (row): Lockout => ({
        scope: row.bucket === ACCOUNT_BUCKET ? 'account' : 'address',
        retryAfterSeconds: secondsUntil(row.reset_at),
      }),
    )
    .reduce((later, next) => (next.retryAfterSeconds > later.retryAfterSeconds ? next : later));

/** A correct login clears its account's failures (its address keeps its count: it may be trying many accounts). */
export async function clearAccountFailures(
  db: CommonQueryMethods,
  account: { kind: 'login' | 'dashboard'; email: string },
): Promise<void> {
  const key = accountKey(account);
  if (key) await db.query(sql.unsafe`delete from rate_limit_windows where bucket = ${ACCOUNT_BUCKET} and key = ${key}`);
}

/** Lifts lockouts by hand: an e-mail's (password and dashboard logins) and/or an address's. Answers how many counts were cleared. */
export async function liftLockout(
  db: CommonQueryMethods,
  target: { email?: string; address?: string },
): Promise<number> {
  const keys = [
    ...(target.email
      ? (['login', 'dashboard'] as const).flatMap((kind) => {
          const key = accountKey({ kind, email: target.email! });
          return key ? [{ bucket: ACCOUNT_BUCKET, key }] : [];
        })
      : []),
    ...(target.address ? [{ bucket: ADDRESS_BUCKET, key: target.address }] : []),
  ];
  const result = await db.query(sql.unsafe`
    delete from rate_limit_windows w using jsonb_to_recordset(${sql.jsonb(keys)}) as k(bucket text, key text)
    where w.bucket = k.bucket and w.key = k.key`);
  return result.rowCount;
}

export type LoginOutcome<T> = { ok: T } | { failed: true } | { refused: true } | { locked: Lockout };

/**
 * One login attempt under the budget. Its failure is counted before
 * `attempt` runs, and only while no lockout stands (else it is not even
 * checked); a success gives the address's count back and clears its
 * account's (an attempt that throws keeps its count: it proved nothing). An
 * address canonicalEmail refuses is nobody's: refused, unchecked and uncounted.
 */
export async function throttledLogin<T>(
  db: Transactor,
  settings: LoginThrottleSettings,
  subject: LoginSubject,
  attempt: () => Promise<T | null>,
): Promise<LoginOutcome<T>> {
  const key = subject.account && accountKey(subject.account);
  if (subject.account && !key) return { refused: true };
  const reserved = await reserveHits(db, settings.windowMs, windowsOf(settings, subject, key));
  if ('full' in reserved) return { locked: lockoutOf(reserved.full) };
  const result = await attempt();
  if (result === null) return { failed: true };
  const address = reserved.counted.find((row) => row.bucket === ADDRESS_BUCKET);
  if (address) await refundHit(db, address);
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
