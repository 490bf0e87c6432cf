// Every login by password or code goes through the login budget
// (core/accounts/login-throttle.ts); a lockout is a 429 rate_limited that
// says which limit it was and when to try again, logged once. An address
// that no account can have (core/accounts/email.ts) is answered as a wrong
// password: it names nobody, so nothing is checked or counted.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { lockoutMessage, throttledLogin, type LoginSubject } from '../core/accounts/login-throttle.ts';
import { RateLimitedError } from './errors.ts';

/**
 * One login attempt under the budget: what `attempt` answered, or null when
 * it failed (counted) or named an address no account can have (not counted).
 * Throws RateLimitedError while a lockout stands.
 * `what` names the login in the log line; `accountFailures` what the
 * account's failures are in the message ("wrong passwords for this account").
 */
export async function loginWithinBudget<T>(
  app: FastifyInstance,
  request: FastifyRequest,
  account: LoginSubject['account'],
  attempt: () => Promise<T | null>,
  { what = 'login', accountFailures }: { what?: string; accountFailures?: string } = {},
): Promise<T | null> {
  const outcome = await throttledLogin(app.db, app.config.loginThrottle, { account, address: request.ip }, attempt);
  if ('locked' in outcome) {
    request.log.warn(
      { scope: outcome.locked.scope, retryAfter: outcome.locked.retryAfterSeconds },
      `${what} refused: locked out`,
    );
    throw new RateLimitedError(outcome.locked.retryAfterSeconds, lockoutMessage(outcome.locked, accountFailures));
  }
  return 'ok' in outcome ? outcome.ok : null;
}
