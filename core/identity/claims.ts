// The claim ceremony: an agent starts an attempt with its claim token, the
// person signs in on the attempt's page and confirms (and reads a user code)
// or denies, the agent completes with the code. The registration's row lock
// serialises everything that happens to one claim.
// Here its limits, its errors and the agent's start; the page's steps are in claim-page.ts, the agent's
// completion in claim-completion.ts.
import { z } from 'zod';
import { AccountEmail, sameEmail } from '../accounts/email.ts';
import { sql, type DatabasePool } from '../db/pool.ts';
import type { RateLimitRule } from '../rate-limit.ts';
import { registrationByClaimToken } from './registrations.ts';

export const CLAIM_ATTEMPT_TTL_S = 600;
export const USER_CODE_TTL_S = 600;
export const MAX_OPEN_ATTEMPTS = 3;
export const MAX_FAILED_CODES = 5;
/**
 * RFC 8628 §5.1: guesses are limited beyond one attempt (which locks after
 * MAX_FAILED_CODES wrong codes). Per client, so one party's guessing never
 * blocks another's correct code; the global limit is only a circuit breaker
 * against guessing spread over many clients, far above honest traffic.
 */
export const USER_CODE_GUESSES_PER_CLIENT: RateLimitRule = {
  bucket: 'user-code-guesses-client',
  limit: 30,
  windowMs: 60_000,
};
export const USER_CODE_GUESSES_GLOBAL: RateLimitRule = { bucket: 'user-code-guesses', limit: 6_000, windowMs: 60_000 };

export type ClaimErrorCode =
  | 'invalid_claim_token'
  | 'claim_revoked'
  | 'claim_expired'
  | 'already_claimed'
  | 'invalid_login_hint'
  | 'too_many_attempts'
  | 'claim_denied'
  | 'claim_not_confirmed'
  | 'user_code_expired'
  | 'invalid_user_code'
  | 'rate_limit_exceeded'
  | 'organization_selection_required'
  | 'stale_organization_selection'
  // The page's own refusals.
  | 'attempt_not_found'
  | 'attempt_closed'
  | 'wrong_account'
  | 'invalid_organization';

export class ClaimError extends Error {
  override name = 'ClaimError';
  constructor(
    public readonly code: ClaimErrorCode,
    message: string,
    public readonly retryAfter?: number,
  ) {
    super(message);
  }
}

/** One canonical address everywhere (core/accounts/email.ts). */
export { sameEmail };

/** POST /agent/identity/claim: opens an attempt whose page the person visits. */
export async function startClaim(
  db: DatabasePool,
  input: { claimToken: string; loginHint: string },
): Promise<{ attemptId: string; expiresIn: number }> {
  return db.transaction(async (tx) => {
    const reg = await registrationByClaimToken(tx, input.claimToken);
    if (!reg) throw new ClaimError('invalid_claim_token', 'The claim token is not known; register again.');
    if (reg.status === 'revoked' || reg.claim_revoked_at)
      throw new ClaimError('claim_revoked', 'This claim was revoked; register again.');
    if (reg.claim_expired) throw new ClaimError('claim_expired', 'The claim token has expired; register again.');
    if (reg.claim_state === 'claimed')
      throw new ClaimError('already_claimed', 'This registration is already claimed; register again.');
    const hint = AccountEmail.safeParse(input.loginHint);
    if (!hint.success) throw new ClaimError('invalid_login_hint', 'login_hint must be an e-mail address.');
    if (reg.type === 'service_auth' && !sameEmail(hint.data, reg.login_hint)) {
      throw new ClaimError(
        'invalid_login_hint',
        'login_hint must be the e-mail address the registration was made for.',
      );
    }
    const pending = await tx.one(sql.type(z.object({ n: z.number(), wait_s: z.number().nullable() }))`
      select count(*)::int as n, ceil(extract(epoch from min(expires_at) - now()))::int as wait_s
      from agent_claim_attempts
      where registration_id = ${reg.id} and status in ('open', 'confirmed') and expires_at > now()`);
    if (pending.n >= MAX_OPEN_ATTEMPTS) {
      throw new ClaimError(
        'too_many_attempts',
        `${pending.n} claim attempts are still pending; wait for one to expire.`,
        Math.max(1, pending.wait_s ?? 1),
      );
    }
    const attemptId = await tx.oneFirst(sql.type(z.object({ id: z.string() }))`
      insert into agent_claim_attempts (registration_id, login_hint, expires_at)
      values (${reg.id}, ${reg.type === 'service_auth' ? reg.login_hint : hint.data}, now() + make_interval(secs => ${CLAIM_ATTEMPT_TTL_S}))
      returning id`);
    return { attemptId, expiresIn: CLAIM_ATTEMPT_TTL_S };
  });
}
