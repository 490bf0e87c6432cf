// The record of a workspace's membership changes: who did what to whom,
// when, from which role to which. Written in the transaction of the change
// it records; the e-mails are copied in, so it reads the same after an
// account is deleted. Admins read it (GET /api/tenants/audit).
import { z } from 'zod';
import { sql, type CommonQueryMethods } from '../db/pool.ts';
import type { Position } from '../paging.ts';
import type { TenantRole } from '../tenants/roles.ts';

export const AUDIT_ACTIONS = [
  'invitation_created',
  'invitation_revoked',
  'invitation_accepted',
  'invitation_resent',
  'role_changed',
  'member_removed',
  'member_left',
  'owner_transferred',
] as const;
export type AuditAction = (typeof AUDIT_ACTIONS)[number];

export type AuditEntry = {
  tenantId: string;
  action: AuditAction;
  actorId: string | null;
  subjectId?: string | null;
  /** For an invitation: the address invited (no account may exist yet). */
  subjectEmail?: string | null;
  invitationId?: string | null;
  fromRole?: TenantRole | null;
  toRole?: TenantRole | null;
  requestId?: string | null;
};

export async function recordAudit(db: CommonQueryMethods, entry: AuditEntry): Promise<void> {
  const subjectId = entry.subjectId ?? null;
  await db.query(sql.unsafe`
    insert into tenant_member_audit (tenant_id, action, actor_id, actor_email, subject_id, subject_email, invitation_id, from_role, to_role, request_id)
    values (${entry.tenantId}, ${entry.action}, ${entry.actorId}, (select email from users where id = ${entry.actorId}::uuid),
      ${subjectId}, coalesce(${entry.subjectEmail ?? null}::text, (select email from users where id = ${subjectId}::uuid)),
      ${entry.invitationId ?? null}, ${entry.fromRole ?? null}, ${entry.toRole ?? null}, ${entry.requestId ?? null})`);
}

export const AuditRow = z.object({
  id: z.string(),
  action: z.string(),
  actor_id: z.string().nullable(),
  actor_email: z.string().nullable(),
  subject_id: z.string().nullable(),
  subject_email: z.string().nullable(),
  invitation_id: z.string().nullable(),
  from_role: z.string().nullable(),
  to_role: z.string().nullable(),
  created_at: z.string(),
  cursor_t: z.string(),
});
export type AuditRow = z.infer<typeof AuditRow>;

/** Newest first, a keyset page (limit + 1 rows). */
export async function listAudit(
  db: CommonQueryMethods,
  tenantId: string,
  page: { limit: number; after: Position | null },
) {
  return db.any(sql.type(AuditRow)`
    select id, action, actor_id, actor_email, subject_id, subject_email, invitation_id, from_role, to_role, created_at, created_at::text as cursor_t
    from tenant_member_audit
    where tenant_id = ${tenantId}
      ${page.after ? sql.fragment`and (created_at, id) < (${page.after.t}::timestamptz, ${page.after.id}::uuid)` : sql.fragment``}
    order by created_at desc, id desc
    limit ${page.limit + 1}`);
}
