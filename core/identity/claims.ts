// The claim ceremony: an agent starts an attempt with its claim token, the
// person signs in on the attempt's page and confirms (and reads a user code)
// or denies, the agent completes with the code. The registration's row lock
// serialises everything that happens to one claim.
import { z } from 'zod';
import { constantTimeEqual } from '../crypto/tokens.ts';
import { sql, type CommonQueryMethods, type DatabasePool } from '../db/pool.ts';
import { hitRateLimit, type RateLimitRule } from '../rate-limit.ts';
import { membershipsOf } from '../accounts/users.ts';
import { issueAgentRefreshToken, registrationByClaimToken, type RegistrationRow } from './registrations.ts';
import type { AssertionClaims } from './tokens.ts';
import { generateUserCode, hashUserCode } from './user-code.ts';

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

const EMAIL = z.email().max(320);
const sameEmail = (a: string | null | undefined, b: string | null | undefined) =>
  !!a && !!b && a.toLowerCase() === b.toLowerCase();

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
    const hint = EMAIL.safeParse(input.loginHint);
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

// ---------------------------------------------------------------- the page

export const AttemptView = z.object({
  id: z.string(),
  registration_id: z.string(),
  status: z.enum(['open', 'confirmed', 'denied', 'completed', 'locked']),
  login_hint: z.string().nullable(),
  organization_id: z.string().nullable(),
  confirmed_by: z.string().nullable(),
  expired: z.boolean(),
  code_expired: z.boolean(),
  registration_status: z.enum(['active', 'revoked']),
  claim_state: z.enum(['unclaimed', 'pending', 'claimed']),
  claim_revoked: z.boolean(),
  claim_expired: z.boolean(),
  tenant_id: z.string(),
  tenant_name: z.string(),
  principal_name: z.string(),
});
export type AttemptView = z.infer<typeof AttemptView>;

/** What the page can do with an attempt right now. */
export type AttemptPhase = 'open' | 'confirmed' | 'denied' | 'completed' | 'expired' | 'revoked';

export function phaseOf(a: AttemptView): AttemptPhase {
  if (a.status === 'denied') return 'denied';
  if (a.status === 'completed' || a.claim_state === 'claimed') return 'completed';
  if (a.registration_status === 'revoked' || a.claim_revoked) return 'revoked';
  if (a.claim_expired || a.status === 'locked') return 'expired';
  if (a.status === 'open') return a.expired ? 'expired' : 'open';
  return a.code_expired ? 'expired' : 'confirmed';
}

const UUID = z.uuid();

export async function findAttempt(
  db: CommonQueryMethods,
  attemptId: string,
  lock = false,
): Promise<AttemptView | null> {
  if (!UUID.safeParse(attemptId).success) return null;
  // Registration before attempt, the order completeClaim locks them in.
  if (lock) {
    await db.query(sql.unsafe`
      select 1 from agent_registrations where id = (select registration_id from agent_claim_attempts where id = ${attemptId}) for update`);
  }
  return db.maybeOne(sql.type(AttemptView)`
    select a.id, a.registration_id, a.status, a.login_hint, a.organization_id, a.confirmed_by,
      a.expires_at <= now() as expired,
      coalesce(a.user_code_expires_at <= now(), false) as code_expired,
      r.status as registration_status, r.claim_state, r.claim_revoked_at is not null as claim_revoked,
      coalesce(r.claim_expires_at <= now(), false) as claim_expired,
      r.tenant_id, t.name as tenant_name, p.display_name as principal_name
    from agent_claim_attempts a
    join agent_registrations r on r.id = a.registration_id
    join tenants t on t.id = r.tenant_id
    join agent_principals p on p.id = r.principal_id
    where a.id = ${attemptId}
    ${lock ? sql.fragment`for update of a` : sql.fragment``}`);
}

/** The person's organizations: their tenants other than the agent's own workspace. */
export async function organizationsOf(db: CommonQueryMethods, userId: string, workspaceId: string) {
  return (await membershipsOf(db, userId))
    .filter((m) => m.tenant_id !== workspaceId)
    .map((m) => ({ id: m.tenant_id, name: m.tenant_name }));
}

type PageAction = { attemptId: string; userId: string; userEmail: string };

/** Locks the attempt and checks it is in one of `phases` and meant for this person. */
async function lockedAttempt(tx: CommonQueryMethods, input: PageAction, phases: AttemptPhase[]): Promise<AttemptView> {
  const attempt = await findAttempt(tx, input.attemptId, true);
  if (!attempt) throw new ClaimError('attempt_not_found', 'No such claim.');
  if (!phases.includes(phaseOf(attempt)))
    throw new ClaimError('attempt_closed', 'This claim can no longer be changed.');
  if (!sameEmail(attempt.login_hint, input.userEmail))
    throw new ClaimError('wrong_account', `This claim is for ${attempt.login_hint}.`);
  return attempt;
}

async function checkedOrganization(
  tx: CommonQueryMethods,
  userId: string,
  attempt: AttemptView,
  picked: string | null,
) {
  const orgs = await organizationsOf(tx, userId, attempt.tenant_id);
  if (picked) {
    if (!orgs.some((o) => o.id === picked))
      throw new ClaimError('invalid_organization', 'Pick one of your organizations.');
    return picked;
  }
  // One organization needs no choice; several wait for the person's pick.
  return orgs.length === 1 ? orgs[0]!.id : null;
}

/** Confirm: the person stands behind the agent; returns the user code to show once. */
export async function confirmAttempt(
  db: DatabasePool,
  input: PageAction & { organizationId: string | null },
): Promise<{ userCode: string; expiresIn: number }> {
  return db.transaction(async (tx) => {
    const attempt = await lockedAttempt(tx, input, ['open']);
    const organizationId = await checkedOrganization(tx, input.userId, attempt, input.organizationId);
    const userCode = generateUserCode();
    await tx.query(sql.unsafe`
      update agent_claim_attempts set status = 'confirmed', confirmed_by = ${input.userId}, confirmed_at = now(),
        organization_id = ${organizationId}, organization_picked_at = case when ${organizationId}::uuid is null then null else now() end,
        user_code_hash = ${hashUserCode(userCode)},
        user_code_expires_at = now() + make_interval(secs => ${USER_CODE_TTL_S})
      where id = ${attempt.id}`);
    return { userCode, expiresIn: USER_CODE_TTL_S };
  });
}

/** Re-select the organization of a confirmed attempt (the code stays the same). */
export async function selectOrganization(
  db: DatabasePool,
  input: PageAction & { organizationId: string | null },
): Promise<void> {
  await db.transaction(async (tx) => {
    const attempt = await lockedAttempt(tx, input, ['confirmed']);
    if (attempt.confirmed_by !== input.userId)
      throw new ClaimError('wrong_account', `This claim was confirmed by another account.`);
    const organizationId = await checkedOrganization(tx, input.userId, attempt, input.organizationId);
    await tx.query(sql.unsafe`
      update agent_claim_attempts
      set organization_id = ${organizationId}, organization_picked_at = case when ${organizationId}::uuid is null then null else now() end
      where id = ${attempt.id}`);
  });
}

/** Deny: this attempt and the registration's claim end for good. */
export async function denyAttempt(db: DatabasePool, input: PageAction): Promise<void> {
  await db.transaction(async (tx) => {
    const attempt = await lockedAttempt(tx, input, ['open', 'confirmed']);
    // confirmed_by records who decided, for a denial too.
    await tx.query(
      sql.unsafe`update agent_claim_attempts set status = 'denied', confirmed_by = ${input.userId} where id = ${attempt.id}`,
    );
    await tx.query(
      sql.unsafe`update agent_registrations set claim_revoked_at = now() where id = ${attempt.registration_id}`,
    );
  });
}

// ---------------------------------------------------------------- completion

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
