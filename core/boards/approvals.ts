// A tenant Admin's decision on a pending public-publish approval. Only a
// pending approval can be decided; the decision is recorded with the person.
import { z } from 'zod';
import { TenantRoleSchema, type TenantRole } from '../tenants/roles.ts';
import { sql, type CommonQueryMethods } from '../db/pool.ts';

export const ApprovalRow = z.object({
  id: z.string(),
  board_id: z.string(),
  version: z.number(),
  visibility: z.enum(['private', 'public']),
  state: z.enum(['pending', 'approved', 'denied', 'consumed']),
  created_at: z.string(),
  decided_at: z.string().nullable(),
});
export type ApprovalRow = z.infer<typeof ApprovalRow>;
const COLUMNS = sql.fragment`id, board_id, version, visibility, state, created_at, decided_at`;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export async function findApproval(db: CommonQueryMethods, tenantId: string, id: string): Promise<ApprovalRow | null> {
  if (!UUID.test(id)) return null;
  return db.maybeOne(
    sql.type(ApprovalRow)`select ${COLUMNS} from board_publish_approvals where id = ${id} and tenant_id = ${tenantId}`,
  );
}

/** How many pending approvals the capability response lists (oldest first). */
export const PENDING_APPROVALS_LISTED = 50;

/**
 * The tenant's pending publish approvals as a json array (oldest first), a
 * subquery for the capability read. Pending is the state publishBoard
 * answers approval_required for: only a newer approval for the same request
 * replaces one, and it is created only after the older one was consumed.
 */
export function pendingApprovalsJson(tenantId: string) {
  return sql.fragment`(
    select coalesce(json_agg(json_build_object('id', a.id, 'board_id', a.board_id, 'version', a.version, 'visibility', a.visibility,
      'requested_by_principal', a.requested_by_principal, 'created_at', a.created_at) order by a.created_at, a.id), '[]'::json)
    from (
      select id, board_id, version, visibility, requested_by_principal, created_at from board_publish_approvals
      where tenant_id = ${tenantId} and state = 'pending' order by created_at, id limit ${PENDING_APPROVALS_LISTED}
    ) a)`;
}
export const PendingApproval = z.object({
  id: z.string(),
  board_id: z.string(),
  version: z.number(),
  visibility: z.enum(['private', 'public']),
  requested_by_principal: z.string().nullable(),
  created_at: z.string(),
});
export type PendingApproval = z.infer<typeof PendingApproval>;

export type Decision =
  | { kind: 'decided'; approval: ApprovalRow }
  | { kind: 'not_found' }
  | { kind: 'already_decided'; approval: ApprovalRow };

export async function decideApproval(
  db: CommonQueryMethods,
  tenantId: string,
  id: string,
  userId: string,
  decision: 'approved' | 'denied',
): Promise<Decision> {
  if (!UUID.test(id)) return { kind: 'not_found' };
  const updated = await db.maybeOne(sql.type(ApprovalRow)`
    update board_publish_approvals set state = ${decision}, decided_by = ${userId}, decided_at = now()
    where id = ${id} and tenant_id = ${tenantId} and state = 'pending' returning ${COLUMNS}`);
  if (updated) return { kind: 'decided', approval: updated };
  const existing = await findApproval(db, tenantId, id);
  return existing ? { kind: 'already_decided', approval: existing } : { kind: 'not_found' };
}

/** What the approval page shows: the request with its board, workspace, asking agent and decider. */
export const ApprovalDetail = ApprovalRow.extend({
  tenant_id: z.string(),
  tenant_name: z.string(),
  board_title: z.string(),
  requested_by_principal: z.string().nullable(),
  requested_by_name: z.string().nullable(),
  decided_by_email: z.string().nullable(),
});
export type ApprovalDetail = z.infer<typeof ApprovalDetail>;

/**
 * An approval by id alone, for the page a person opens from approve_url. Not
 * tenant-scoped: the caller must check the person's membership in
 * tenant_id (memberRole) before showing or deciding anything.
 */
export async function approvalForPage(db: CommonQueryMethods, id: string): Promise<ApprovalDetail | null> {
  if (!UUID.test(id)) return null;
  return db.maybeOne(sql.type(ApprovalDetail)`
    select a.id, a.board_id, a.version, a.visibility, a.state, a.created_at, a.decided_at,
      a.tenant_id, t.name as tenant_name, b.title as board_title,
      a.requested_by_principal, p.display_name as requested_by_name, u.email as decided_by_email
    from board_publish_approvals a
    join tenants t on t.id = a.tenant_id
    join insight_boards b on b.id = a.board_id and b.tenant_id = a.tenant_id
    left join agent_principals p on p.id = a.requested_by_principal
    left join users u on u.id = a.decided_by
    where a.id = ${id}`);
}

/** The person's role in a tenant, read fresh (no cache): null when not a member. */
export async function memberRole(db: CommonQueryMethods, tenantId: string, userId: string): Promise<TenantRole | null> {
  return db.maybeOneFirst(sql.type(z.object({ role: TenantRoleSchema }))`
    select role from tenant_memberships where tenant_id = ${tenantId} and user_id = ${userId}`);
}

/**
 * The page's decision: like decideApproval, but the Admin role is checked in
 * the same statement that decides, so a role taken away meanwhile cannot decide.
 */
export async function decideApprovalAsAdmin(
  db: CommonQueryMethods,
  id: string,
  userId: string,
  decision: 'approved' | 'denied',
): Promise<Decision | { kind: 'forbidden' }> {
  if (!UUID.test(id)) return { kind: 'not_found' };
  const updated = await db.maybeOne(sql.type(ApprovalRow)`
    update board_publish_approvals a set state = ${decision}, decided_by = ${userId}, decided_at = now()
    where a.id = ${id} and a.state = 'pending'
      and exists (select 1 from tenant_memberships m where m.tenant_id = a.tenant_id and m.user_id = ${userId} and m.role = 'admin')
    returning a.id, a.board_id, a.version, a.visibility, a.state, a.created_at, a.decided_at`);
  if (updated) return { kind: 'decided', approval: updated };
  const existing = await approvalForPage(db, id);
  if (!existing) return { kind: 'not_found' };
  const role = await memberRole(db, existing.tenant_id, userId);
  if (!role) return { kind: 'not_found' };
  if (role !== 'admin') return { kind: 'forbidden' };
  return { kind: 'already_decided', approval: existing };
}
