// The claim page's side of the ceremony: reading an attempt and what can be done with it, and the person's
// confirm (with the user code to show), organization choice and deny, each under the registration's lock.
import { z } from 'zod';
import { sql, type CommonQueryMethods, type DatabasePool } from '../db/pool.ts';
import { membershipsOf } from '../accounts/users.ts';
import { ClaimError, sameEmail, USER_CODE_TTL_S } from './claims.ts';
import { generateUserCode, hashUserCode } from './user-code.ts';

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
    .map((m) => ({ id: m.tenant_id, name: m.tenant_name, role: m.role }));
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
