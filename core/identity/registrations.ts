// Agent registrations: each one gets its own new free workspace (tenant) and
// an agent principal in it. Anonymous ones are usable at once; service_auth
// ones wait for a person to claim them. Refresh and claim tokens are random
// and stored only as SHA-256.
import { z } from 'zod';
import { randomToken, sha256 } from '../crypto/tokens.ts';
import { sql, type CommonQueryMethods, type DatabasePool } from '../db/pool.ts';
import { DEFAULT_TENANT_SETTINGS } from '../tenants/tenants.ts';

export const RegistrationRow = z.object({
  id: z.string(),
  type: z.enum(['anonymous', 'service_auth']),
  status: z.enum(['active', 'revoked']),
  claim_state: z.enum(['unclaimed', 'pending', 'claimed']),
  tenant_id: z.string(),
  principal_id: z.string(),
  login_hint: z.string().nullable(),
  claim_expires_at: z.string().nullable(),
  claim_revoked_at: z.string().nullable(),
  claimed_by: z.string().nullable(),
  claimed_at: z.string().nullable(),
  created_at: z.string(),
});
export type RegistrationRow = z.infer<typeof RegistrationRow>;
export const registrationRow = sql.type(RegistrationRow);
export const REGISTRATION_COLUMNS = sql.fragment`id, type, status, claim_state, tenant_id, principal_id, login_hint,
  claim_expires_at, claim_revoked_at, claimed_by, claimed_at, created_at`;

export type NewRegistration = { registration: RegistrationRow; claimToken: string; refreshToken: string | null };

async function issueAgentRefreshToken(tx: CommonQueryMethods, registrationId: string): Promise<string> {
  const token = randomToken('art_');
  await tx.query(
    sql.unsafe`insert into agent_refresh_tokens (registration_id, token_hash) values (${registrationId}, ${sha256(token)})`,
  );
  return token;
}

/** Creates workspace, principal and registration in one transaction. */
export async function createRegistration(
  db: DatabasePool,
  input: { type: 'anonymous' | 'service_auth'; loginHint?: string; ip: string; claimTokenTtlS: number },
): Promise<NewRegistration> {
  return db.transaction(async (tx) => {
    const tenantId = await tx.oneFirst(sql.type(z.object({ id: z.string() }))`
      insert into tenants (name, settings, plan) values ('Agent workspace', ${sql.jsonb(DEFAULT_TENANT_SETTINGS)}, 'free') returning id`);
    const principalId = await tx.oneFirst(sql.type(z.object({ id: z.string() }))`
      insert into agent_principals (tenant_id, display_name) values (${tenantId}, 'Agent') returning id`);
    const claimToken = randomToken('ct_');
    const registration = await tx.one(registrationRow`
      insert into agent_registrations (type, claim_state, tenant_id, principal_id, login_hint, claim_token_hash, claim_expires_at, created_ip)
      values (${input.type}, ${input.type === 'anonymous' ? 'unclaimed' : 'pending'}, ${tenantId}, ${principalId},
        ${input.loginHint ?? null}, ${sha256(claimToken)}, now() + make_interval(secs => ${input.claimTokenTtlS}), ${input.ip})
      returning ${REGISTRATION_COLUMNS}`);
    // A service_auth registration gets its refresh token when the claim verifies.
    const refreshToken = input.type === 'anonymous' ? await issueAgentRefreshToken(tx, registration.id) : null;
    return { registration, claimToken, refreshToken };
  });
}

export type RefreshOutcome =
  | { registration: RegistrationRow; refreshToken: string }
  | { error: 'invalid_refresh_token' };

/**
 * Rotates a refresh token. A token that was already rotated out means a copy
 * exists: the registration's current token is revoked as well.
 */
export async function rotateAgentRefreshToken(db: DatabasePool, token: string): Promise<RefreshOutcome> {
  return db.transaction(async (tx) => {
    const row = await tx.maybeOne(sql.type(
      z.object({ id: z.string(), registration_id: z.string(), status: z.string() }),
    )`
      select id, registration_id, status from agent_refresh_tokens where token_hash = ${sha256(token)} for update`);
    if (!row) return { error: 'invalid_refresh_token' as const };
    if (row.status === 'rotated') {
      await tx.query(sql.unsafe`
        update agent_refresh_tokens set status = 'revoked' where registration_id = ${row.registration_id} and status = 'active'`);
      return { error: 'invalid_refresh_token' as const };
    }
    if (row.status !== 'active') return { error: 'invalid_refresh_token' as const };
    const registration = await tx.one(registrationRow`
      select ${REGISTRATION_COLUMNS} from agent_registrations where id = ${row.registration_id}`);
    if (registration.status !== 'active') return { error: 'invalid_refresh_token' as const };
    await tx.query(
      sql.unsafe`update agent_refresh_tokens set status = 'rotated', rotated_at = now() where id = ${row.id}`,
    );
    return { registration, refreshToken: await issueAgentRefreshToken(tx, registration.id) };
  });
}

/** The claim tokens's registration, locked for the caller's transaction. */
export async function registrationByClaimToken(
  tx: CommonQueryMethods,
  claimToken: string,
): Promise<(RegistrationRow & { claim_expired: boolean }) | null> {
  return tx.maybeOne(sql.type(RegistrationRow.extend({ claim_expired: z.boolean() }))`
    select ${REGISTRATION_COLUMNS}, claim_expires_at <= now() as claim_expired
    from agent_registrations where claim_token_hash = ${sha256(claimToken)} for update`);
}

export { issueAgentRefreshToken };

export async function findRegistration(db: CommonQueryMethods, id: string): Promise<RegistrationRow | null> {
  return db.maybeOne(registrationRow`select ${REGISTRATION_COLUMNS} from agent_registrations where id = ${id}`);
}
