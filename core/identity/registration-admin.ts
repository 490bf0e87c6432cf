// People act on their agents: a tenant's Admin lists the agent registrations
// that act in the tenant or were made with it as their own workspace, and
// revokes one (its next call answers 401 registration_revoked) or unlinks
// its principal (401 principal_not_linked). Every api replica forgets the
// registration at once (agent_auth_notify, 0040), so the change holds
// everywhere within a second.
import { z } from 'zod';
import { ACTING_TENANT } from '../agent/capabilities.ts';
import { sql, type CommonQueryMethods, type DatabasePool } from '../db/pool.ts';
import type { Position } from '../paging.ts';
import { RegistrationRow } from './registrations.ts';

/** A registration as its tenant's Admin sees it: the registration's own columns, its principal, where it acts. */
export const RegistrationListRow = RegistrationRow.pick({
  id: true,
  type: true,
  status: true,
  claim_state: true,
  principal_id: true,
  claimed_at: true,
  created_at: true,
}).extend({
  principal_name: z.string(),
  principal_status: z.enum(['active', 'unlinked']),
  linked: z.boolean(),
  own_tenant_id: z.string(),
  acting_tenant_id: z.string(),
  claimed_by_email: z.string().nullable(),
  revoked_at: z.string().nullable(),
  cursor_t: z.string(),
});
export type RegistrationListRow = z.infer<typeof RegistrationListRow>;

const listColumns = sql.fragment`
  r.id, r.type, r.status, r.claim_state, p.id as principal_id, p.display_name as principal_name, p.status as principal_status,
  p.status = 'active' and (r.claim_state <> 'claimed' or exists (
    select 1 from tenant_memberships m where m.tenant_id = ${ACTING_TENANT} and m.user_id = r.claimed_by)) as linked,
  r.tenant_id as own_tenant_id, ${ACTING_TENANT} as acting_tenant_id, u.email as claimed_by_email,
  r.claimed_at, r.created_at, r.revoked_at, r.created_at::text as cursor_t`;
const listFrom = sql.fragment`
  from agent_registrations r
  join agent_principals p on p.id = r.principal_id
  left join users u on u.id = r.claimed_by`;
/** The registrations a tenant's Admin sees: acting in it, or made with it as their own workspace. */
const visibleIn = (tenantId: string) => sql.fragment`(r.tenant_id = ${tenantId} or r.organization_id = ${tenantId})`;

/** A keyset page (limit + 1 rows), newest first. */
export async function listRegistrations(
  db: CommonQueryMethods,
  tenantId: string,
  page: { limit: number; after: Position | null },
) {
  return db.any(sql.type(RegistrationListRow)`
    select ${listColumns} ${listFrom}
    where ${visibleIn(tenantId)}
      ${page.after ? sql.fragment`and (r.created_at, r.id) < (${page.after.t}::timestamptz, ${page.after.id}::uuid)` : sql.fragment``}
    order by r.created_at desc, r.id desc
    limit ${page.limit + 1}`);
}

async function visibleRegistration(db: CommonQueryMethods, tenantId: string, registrationId: string) {
  return db.maybeOne(
    sql.type(
      RegistrationListRow,
    )`select ${listColumns} ${listFrom} where r.id = ${registrationId} and ${visibleIn(tenantId)}`,
  );
}

/** Revokes the registration and its refresh tokens; null when the tenant's Admin cannot see it. Repeating it changes nothing. */
export async function revokeRegistration(
  db: DatabasePool,
  input: { tenantId: string; registrationId: string; userId: string },
) {
  return db.transaction(async (tx) => {
    const found = await tx.maybeOneFirst(sql.type(z.object({ id: z.string() }))`
      select r.id from agent_registrations r where r.id = ${input.registrationId} and ${visibleIn(input.tenantId)} for update`);
    if (!found) return null;
    await tx.query(sql.unsafe`
      update agent_registrations set status = 'revoked', revoked_at = now(), revoked_by = ${input.userId}
      where id = ${found} and status = 'active'`);
    await tx.query(
      sql.unsafe`update agent_refresh_tokens set status = 'revoked' where registration_id = ${found} and status = 'active'`,
    );
    return visibleRegistration(tx, input.tenantId, found);
  });
}

/** Unlinks the registration's agent principal: its calls answer principal_not_linked. Null when not visible. */
export async function unlinkRegistration(
  db: DatabasePool,
  input: { tenantId: string; registrationId: string; userId: string },
) {
  return db.transaction(async (tx) => {
    const principal = await tx.maybeOneFirst(sql.type(z.object({ principal_id: z.string() }))`
      select r.principal_id from agent_registrations r where r.id = ${input.registrationId} and ${visibleIn(input.tenantId)} for update`);
    if (!principal) return null;
    await tx.query(sql.unsafe`
      update agent_principals set status = 'unlinked', unlinked_at = now(), unlinked_by = ${input.userId}
      where id = ${principal} and status = 'active'`);
    return visibleRegistration(tx, input.tenantId, input.registrationId);
  });
}
