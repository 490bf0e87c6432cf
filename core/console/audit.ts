// The audit of operator actions (operator_actions, 0041): every action the
// console takes is written in the same transaction as its effect.
import { z } from 'zod';
import { sql, type CommonQueryMethods } from '../db/pool.ts';

export const OPERATOR_ACTIONS = ['job.retry', 'job.cancel', 'tenant.suspend', 'tenant.resume'] as const;
export type OperatorAction = (typeof OPERATOR_ACTIONS)[number];

export const AuditRow = z.object({
  id: z.number(),
  at: z.string(),
  operator_email: z.string(),
  action: z.enum(OPERATOR_ACTIONS),
  tenant_id: z.string().nullable(),
  tenant_name: z.string().nullable(),
  job_id: z.string().nullable(),
  reason: z.string(),
  outcome: z.string(),
});
export type AuditRow = z.infer<typeof AuditRow>;

export type Operator = { userId: string; email: string };

export async function recordAction(
  tx: CommonQueryMethods,
  operator: Operator,
  entry: { action: OperatorAction; tenantId: string | null; jobId: string | null; reason: string; outcome: string },
): Promise<void> {
  await tx.query(sql.unsafe`
    insert into operator_actions (operator_id, operator_email, action, tenant_id, job_id, reason, outcome)
    values (${operator.userId}, ${operator.email}, ${entry.action}, ${entry.tenantId}, ${entry.jobId}, ${entry.reason.slice(0, 500)}, ${entry.outcome.slice(0, 500)})`);
}

export const AUDIT_PAGE_SIZE = 50;

export async function listAudit(
  db: CommonQueryMethods,
  filter: { jobId?: string; tenantId?: string; beforeId?: number } = {},
  limit = AUDIT_PAGE_SIZE,
): Promise<{ rows: readonly AuditRow[]; more: boolean }> {
  const where = [sql.fragment`true`];
  if (filter.jobId) where.push(sql.fragment`a.job_id = ${filter.jobId}`);
  if (filter.tenantId) where.push(sql.fragment`a.tenant_id = ${filter.tenantId}`);
  if (filter.beforeId) where.push(sql.fragment`a.id < ${filter.beforeId}`);
  const rows = await db.any(sql.type(AuditRow)`
    select a.id::int, a.at, a.operator_email, a.action, a.tenant_id, t.name as tenant_name, a.job_id, a.reason, a.outcome
    from operator_actions a left join tenants t on t.id = a.tenant_id
    where ${sql.join(where, sql.fragment` and `)}
    order by a.id desc limit ${limit + 1}`);
  return { rows: rows.slice(0, limit), more: rows.length > limit };
}
