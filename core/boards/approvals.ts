// A tenant Admin's decision on a pending public-publish approval. Only a
// pending approval can be decided; the decision is recorded with the person.
import { z } from 'zod';
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
  return db.maybeOne(sql.type(ApprovalRow)`select ${COLUMNS} from board_publish_approvals where id = ${id} and tenant_id = ${tenantId}`);
}

export type Decision = { kind: 'decided'; approval: ApprovalRow } | { kind: 'not_found' } | { kind: 'already_decided'; approval: ApprovalRow };

export async function decideApproval(db: CommonQueryMethods, tenantId: string, id: string, userId: string, decision: 'approved' | 'denied'): Promise<Decision> {
  if (!UUID.test(id)) return { kind: 'not_found' };
  const updated = await db.maybeOne(sql.type(ApprovalRow)`
    update board_publish_approvals set state = ${decision}, decided_by = ${userId}, decided_at = now()
    where id = ${id} and tenant_id = ${tenantId} and state = 'pending' returning ${COLUMNS}`);
  if (updated) return { kind: 'decided', approval: updated };
  const existing = await findApproval(db, tenantId, id);
  return existing ? { kind: 'already_decided', approval: existing } : { kind: 'not_found' };
}
