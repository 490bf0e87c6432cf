// A workspace's members: list, change a role, remove, leave. Every change
// runs with the tenant's row locked, so two Admins demoting each other at
// once cannot leave the workspace without one. Two rules hold:
// - the last Admin can neither leave nor be demoted or removed;
// - the owner (the account the workspace counts for: its plan, its fair
//   share, its workspace limit) stays an Admin and a member, until they hand
//   the workspace over to another Admin.
// Deleting the membership row is what ends access: its trigger tells every
// api replica (tenant_memberships_cache_notify, 0007), websockets drop the
// tenant's subscriptions, and agents the person claimed into it stop (0040).
import { z } from 'zod';
import { sql, type CommonQueryMethods } from '../db/pool.ts';
import type { Position } from '../paging.ts';
import { ROLE_TITLES, TenantRoleSchema, type TenantRole } from '../tenants/roles.ts';
import { recordAudit } from './audit.ts';

/** A rule of the workspace refused the change (409, naming the rule). */
export class MembershipRuleError extends Error {
  override name = 'MembershipRuleError';
  constructor(
    public readonly code: 'last_admin' | 'owner_protected' | 'owner_must_be_admin',
    message: string,
  ) {
    super(message);
  }
}

export class NotAMemberError extends Error {
  override name = 'NotAMemberError';
}

/** Only the owner hands a workspace over (403). */
export class NotTheOwnerError extends Error {
  override name = 'NotTheOwnerError';
}

export const MemberRow = z.object({
  id: z.string(),
  email: z.string(),
  display_name: z.string().nullable(),
  role: TenantRoleSchema,
  owner: z.boolean(),
  created_at: z.string(),
  cursor_t: z.string(),
});
export type MemberRow = z.infer<typeof MemberRow>;

const memberColumns = (tenantId: string) => sql.fragment`
  u.id, u.email, u.display_name, m.role, t.owner_id is not distinct from u.id as owner, m.created_at, m.created_at::text as cursor_t
  from tenant_memberships m join users u on u.id = m.user_id join tenants t on t.id = m.tenant_id
  where m.tenant_id = ${tenantId}`;

/** Members in the order they joined, a keyset page (limit + 1 rows). */
export async function listMembers(
  db: CommonQueryMethods,
  tenantId: string,
  page: { limit: number; after: Position | null },
) {
  return db.any(sql.type(MemberRow)`
    select ${memberColumns(tenantId)}
      ${page.after ? sql.fragment`and (m.created_at, m.user_id) > (${page.after.t}::timestamptz, ${page.after.id}::uuid)` : sql.fragment``}
    order by m.created_at, m.user_id
    limit ${page.limit + 1}`);
}

export async function findMember(db: CommonQueryMethods, tenantId: string, userId: string): Promise<MemberRow | null> {
  return db.maybeOne(sql.type(MemberRow)`select ${memberColumns(tenantId)} and m.user_id = ${userId}`);
}

/** Serialises a workspace's membership changes (and its invitations' bounds): its row, locked until commit. */
export async function lockTenant(tx: CommonQueryMethods, tenantId: string): Promise<void> {
  await tx.query(sql.unsafe`select 1 from tenants where id = ${tenantId} for update`);
}

type Locked = { member: MemberRow; admins: number };

/** Locks the tenant (serialising its membership changes) and reads the member and the Admin count. */
async function lockMember(tx: CommonQueryMethods, tenantId: string, userId: string): Promise<Locked> {
  await lockTenant(tx, tenantId);
  const member = await findMember(tx, tenantId, userId);
  if (!member) throw new NotAMemberError('No such member of this workspace.');
  const admins = await tx.oneFirst(sql.type(z.object({ n: z.number() }))`
    select count(*)::int as n from tenant_memberships where tenant_id = ${tenantId} and role = 'admin'`);
  return { member, admins };
}

/** `action` is what was asked, as the message words it: "make them a Viewer", "leave", "remove them". */
function mustKeepAdmin({ member, admins }: Locked, action: string): void {
  if (member.owner) {
    throw new MembershipRuleError(
      'owner_protected',
      `The workspace's owner stays an Admin and a member (the workspace counts for their account). To ${action}, the owner first hands the workspace over to another Admin (POST /api/tenants/owner).`,
    );
  }
  if (member.role === 'admin' && admins <= 1) {
    throw new MembershipRuleError(
      'last_admin',
      `A workspace keeps at least one Admin: make another member an Admin first, then ${action}.`,
    );
  }
}

export type Actor = { userId: string; requestId?: string };

export async function changeRole(
  db: CommonQueryMethods,
  tenantId: string,
  actor: Actor,
  userId: string,
  role: TenantRole,
): Promise<MemberRow> {
  return db.transaction(async (tx) => {
    const locked = await lockMember(tx, tenantId, userId);
    const from = locked.member.role;
    if (from === role) return locked.member;
    if (from === 'admin') mustKeepAdmin(locked, `make them a ${ROLE_TITLES[role]}`);
    await tx.query(
      sql.unsafe`update tenant_memberships set role = ${role} where tenant_id = ${tenantId} and user_id = ${userId}`,
    );
    await recordAudit(tx, {
      tenantId,
      action: 'role_changed',
      actorId: actor.userId,
      subjectId: userId,
      fromRole: from,
      toRole: role,
      requestId: actor.requestId,
    });
    return { ...locked.member, role };
  });
}

/** Removes a member; removing oneself is leaving (recorded as such). */
export async function removeMember(
  db: CommonQueryMethods,
  tenantId: string,
  actor: Actor,
  userId: string,
): Promise<void> {
  const leaving = actor.userId === userId;
  await db.transaction(async (tx) => {
    const locked = await lockMember(tx, tenantId, userId);
    mustKeepAdmin(locked, leaving ? 'leave' : 'remove them');
    await tx.query(sql.unsafe`delete from tenant_memberships where tenant_id = ${tenantId} and user_id = ${userId}`);
    await recordAudit(tx, {
      tenantId,
      action: leaving ? 'member_left' : 'member_removed',
      actorId: actor.userId,
      subjectId: userId,
      fromRole: locked.member.role,
      requestId: actor.requestId,
    });
  });
}

/**
 * Hands the workspace over to another Admin: it then counts for their
 * account (fair share, plan limits; its open jobs move with it, 0037's
 * trigger), and the former owner stays an Admin, free to leave. Only the
 * owner may, or any Admin of a workspace nobody owns (an agent's workspace
 * no person claimed). Handing it to its owner changes nothing.
 */
export async function transferOwnership(
  db: CommonQueryMethods,
  tenantId: string,
  actor: Actor,
  userId: string,
): Promise<MemberRow> {
  return db.transaction(async (tx) => {
    await lockTenant(tx, tenantId);
    const ownerId = await tx.oneFirst(sql.type(z.object({ owner_id: z.string().nullable() }))`
      select owner_id from tenants where id = ${tenantId}`);
    if (ownerId !== null && ownerId !== actor.userId)
      throw new NotTheOwnerError("Only the workspace's owner can hand it over; ask them.");
    const member = await findMember(tx, tenantId, userId);
    if (!member) throw new NotAMemberError('No such member of this workspace.');
    if (member.owner) return member;
    if (member.role !== 'admin')
      throw new MembershipRuleError(
        'owner_must_be_admin',
        'The owner is an Admin: make them an Admin first, then hand the workspace over.',
      );
    await tx.query(sql.unsafe`update tenants set owner_id = ${userId} where id = ${tenantId}`);
    await recordAudit(tx, {
      tenantId,
      action: 'owner_transferred',
      actorId: actor.userId,
      subjectId: userId,
      requestId: actor.requestId,
    });
    return { ...member, owner: true };
  });
}
