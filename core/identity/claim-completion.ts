// The agent's completion of a claim: the user code checked (wrong guesses counted and rate-limited), the
// workspace bound to the person and the identity returned once.
import { z } from 'zod';
import { constantTimeEqual } from '../crypto/tokens.ts';
import { sql, type CommonQueryMethods, type DatabasePool } from '../db/pool.ts';
import { hitRateLimit } from '../rate-limit.ts';
import { organizationsOf } from './claim-page.ts';
import { ClaimError, MAX_FAILED_CODES, USER_CODE_GUESSES_GLOBAL, USER_CODE_GUESSES_PER_CLIENT } from './claims.ts';
import { issueAgentRefreshToken, registrationByClaimToken, type RegistrationRow } from './registrations.ts';
import type { AssertionClaims } from './tokens.ts';
import { hashUserCode } from './user-code.ts';

const ConfirmedAttempt = z.object({
  id: z.string(),
  status: z.enum(['confirmed', 'locked']),
  user_code_hash: z.string().nullable(),
  code_expired: z.boolean(),
  confirmed_by: z.string().nullable(),
  organization_id: z.string().nullable(),
  organization_picked: z.boolean(),
});
type ConfirmedAttempt = z.infer<typeof ConfirmedAttempt>;

export type CompletedClaim = { registration: RegistrationRow; assertion: string; refreshToken: string };

type CompleteInput = {
  claimToken: string;
  userCode: string;
  /** The caller's address: guesses are counted per client. */
  clientIp: string;
  sign: (claims: AssertionClaims) => Promise<string>;
};

type ClaimState = {
  reg: NonNullable<Awaited<ReturnType<typeof registrationByClaimToken>>>;
  attempt: ConfirmedAttempt & { user_code_hash: string; confirmed_by: string };
};

/** Everything that refuses a completion before the code is looked at (locks when q is a transaction). */
async function stateBeforeCode(q: CommonQueryMethods, claimToken: string): Promise<ClaimState | ClaimError> {
  const reg = await registrationByClaimToken(q, claimToken);
  if (!reg) return new ClaimError('invalid_claim_token', 'The claim token is not known; register again.');
  if (reg.claim_state === 'claimed')
    return new ClaimError('already_claimed', 'This registration is already claimed; the identity was returned once.');
  if (reg.claim_expired) return new ClaimError('claim_expired', 'The claim token has expired; register again.');
  const denied = await q.exists(
    sql.unsafe`select 1 from agent_claim_attempts where registration_id = ${reg.id} and status = 'denied'`,
  );
  if (denied) return new ClaimError('claim_denied', 'The person denied this claim; register again.');
  if (reg.status === 'revoked' || reg.claim_revoked_at)
    return new ClaimError('claim_revoked', 'This claim was revoked; register again.');
  const attempt = await q.maybeOne(sql.type(ConfirmedAttempt)`
    select id, status, user_code_hash, coalesce(user_code_expires_at <= now(), true) as code_expired, confirmed_by, organization_id,
      organization_picked_at is not null as organization_picked
    from agent_claim_attempts where registration_id = ${reg.id} and status in ('confirmed', 'locked')
    order by confirmed_at desc nulls last, created_at desc limit 1 for update`);
  if (!attempt) return new ClaimError('claim_not_confirmed', 'The person has not confirmed yet; wait and retry.');
  if (attempt.status === 'locked' || attempt.code_expired || !attempt.user_code_hash || !attempt.confirmed_by) {
    return new ClaimError(
      'user_code_expired',
      'The user code is no longer valid; start the claim again for a fresh link.',
    );
  }
  return { reg, attempt: { ...attempt, user_code_hash: attempt.user_code_hash, confirmed_by: attempt.confirmed_by } };
}

/** POST /agent/identity/claim/complete: verify the code, bind the workspace, return the identity once. */
export async function completeClaim(db: DatabasePool, input: CompleteInput): Promise<CompletedClaim> {
  // First without locks: only a call that gets as far as the code counts as a
  // guess (polling while the person has not confirmed must not), and the count
  // and the signing use the pool, which slonik keeps out of a transaction.
  const early = await stateBeforeCode(db, input.claimToken);
  if (early instanceof ClaimError) throw early;
  const client = await hitRateLimit(db, USER_CODE_GUESSES_PER_CLIENT, input.clientIp);
  if (!client.allowed)
    throw new ClaimError(
      'rate_limit_exceeded',
      'Too many user code guesses from this client; wait and retry.',
      client.retryAfterSeconds,
    );
  const global = await hitRateLimit(db, USER_CODE_GUESSES_GLOBAL, 'global');
  if (!global.allowed)
    throw new ClaimError(
      'rate_limit_exceeded',
      'Too many user code guesses; wait and retry.',
      global.retryAfterSeconds,
    );
  // Signed before the transaction commits, so a signing failure leaves the claim open; unused if refused below.
  const assertion = await input.sign({ registrationId: early.reg.id, principalId: early.reg.principal_id });

  // Then again under the registration's lock, which decides. A wrong code must
  // be counted, so refusals are returned (and committed), then thrown.
  const outcome = await db.transaction(async (tx): Promise<CompletedClaim | ClaimError> => {
    const state = await stateBeforeCode(tx, input.claimToken);
    if (state instanceof ClaimError) return state;
    const { reg, attempt } = state;
    if (reg.id !== early.reg.id)
      return new ClaimError('invalid_claim_token', 'The claim token is not known; register again.');
    if (!constantTimeEqual(hashUserCode(input.userCode), attempt.user_code_hash)) {
      await tx.query(sql.unsafe`
        update agent_claim_attempts set failed_codes = failed_codes + 1,
          status = case when failed_codes + 1 >= ${MAX_FAILED_CODES} then 'locked' else status end
        where id = ${attempt.id}`);
      return new ClaimError('invalid_user_code', 'The user code is wrong; ask the person again.');
    }
    const userId = attempt.confirmed_by;
    const orgs = await organizationsOf(tx, userId, reg.tenant_id);
    const pickedGone = attempt.organization_picked && !attempt.organization_id; // deleted since it was picked
    if (pickedGone || (attempt.organization_id && !orgs.some((o) => o.id === attempt.organization_id))) {
      return new ClaimError(
        'stale_organization_selection',
        'The chosen organization is no longer available; the person must choose again on the claim page.',
      );
    }
    if (!attempt.organization_id && orgs.length > 0) {
      return new ClaimError(
        'organization_selection_required',
        'The person must choose an organization on the claim page; then retry.',
      );
    }

    await tx.query(sql.unsafe`
      update agent_registrations set claim_state = 'claimed', claimed_by = ${userId}, claimed_at = now(), organization_id = ${attempt.organization_id}
      where id = ${reg.id}`);
    // The workspace is kept as it is and bound to the person; never merged.
    // Unowned until now, it joins the person's account (fairness and quotas count by account).
    await tx.query(sql.unsafe`
      insert into tenant_memberships (tenant_id, user_id, role) values (${reg.tenant_id}, ${userId}, 'admin') on conflict do nothing`);
    await tx.query(
      sql.unsafe`update tenants set owner_id = ${userId} where id = ${reg.tenant_id} and owner_id is null`,
    );
    await tx.query(
      sql.unsafe`update agent_claim_attempts set status = 'completed', completed_at = now() where id = ${attempt.id}`,
    );
    // An anonymous registration's old refresh token is rotated out (reuse then revokes).
    await tx.query(sql.unsafe`
      update agent_refresh_tokens set status = 'rotated', rotated_at = now() where registration_id = ${reg.id} and status = 'active'`);
    const refreshToken = await issueAgentRefreshToken(tx, reg.id);
    const { claim_expired: _expired, ...row } = reg;
    return { registration: { ...row, claim_state: 'claimed', claimed_by: userId }, assertion, refreshToken };
  });
  if (outcome instanceof ClaimError) throw outcome;
  return outcome;
}
