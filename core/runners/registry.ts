// The tenant's runner registry for people: list, read one, revoke. Rows never
// carry the token hash out of this module. Revocation keeps the row (history
// and the managed agents that name it stay valid) and is repeatable.
import { z } from 'zod';
import { sql, type CommonQueryMethods } from '../db/pool.ts';
import { decodeCursor, pageOf } from '../paging.ts';
import { RUNNER_ONLINE } from './runners.ts';

export const RUNNER_STATUSES = ['active', 'revoked'] as const;

export const RunnerRow = z.object({
  id: z.string(),
  name: z.string(),
  status: z.enum(RUNNER_STATUSES),
  enrolled_at: z.string(),
  last_heartbeat_at: z.string().nullable(),
  online: z.boolean(),
  gateway_connected: z.boolean(),
  revoked_at: z.string().nullable(),
});
export type RunnerRow = z.infer<typeof RunnerRow>;
const row = sql.type(RunnerRow);
const COLUMNS = sql.fragment`id, name, status, enrolled_at, last_heartbeat_at, ${RUNNER_ONLINE} as online, gateway_connected, revoked_at`;

const RunnerPageRow = RunnerRow.extend({ cursor_t: z.string() });

/** Newest enrolment first; throws InvalidCursorError for a cursor this service did not issue. */
export async function listRunners(
  db: CommonQueryMethods,
  tenantId: string,
  q: { limit: number; cursor?: string | undefined; status?: (typeof RUNNER_STATUSES)[number] | undefined },
) {
  const after = q.cursor === undefined ? null : decodeCursor(q.cursor);
  const rows = await db.any(sql.type(RunnerPageRow)`
    select ${COLUMNS}, enrolled_at::text as cursor_t from runners
    where tenant_id = ${tenantId}
      ${q.status ? sql.fragment`and status = ${q.status}` : sql.fragment``}
      ${after ? sql.fragment`and (enrolled_at, id) < (${after.t}::timestamptz, ${after.id}::uuid)` : sql.fragment``}
    order by enrolled_at desc, id desc limit ${q.limit + 1}`);
  const page = pageOf(rows, q.limit);
  return { items: page.items.map(({ cursor_t: _t, ...item }) => item), nextCursor: page.nextCursor };
}

/** The runner in this tenant, or null: another tenant's runner reads as absent. */
export async function findRunner(db: CommonQueryMethods, tenantId: string, id: string): Promise<RunnerRow | null> {
  return db.maybeOne(row`select ${COLUMNS} from runners where id = ${id} and tenant_id = ${tenantId}`);
}

/**
 * Revokes the runner: its token stops authenticating (runnerByToken, and the
 * heartbeat and acknowledgement writes, match only active runners) and
 * readiness no longer considers it. Revoking again returns the row unchanged,
 * revoked_at included. Null when the runner is not in this tenant.
 *
 * Its work is left as it is: pending restore work stays pending (nobody can
 * acknowledge it any more), so the restore job waits, times out and fails
 * the way it does for a runner that went away; managed agents keep naming
 * the runner, which readiness only uses as a preference among active runners.
 * A later restore therefore gets whatever readiness says about the runners
 * that remain (runner_not_enrolled when none is left, runner_offline, ...).
 */
export async function revokeRunner(db: CommonQueryMethods, tenantId: string, id: string): Promise<RunnerRow | null> {
  const revoked = await db.maybeOne(row`
    update runners set status = 'revoked', revoked_at = now()
    where id = ${id} and tenant_id = ${tenantId} and status = 'active'
    returning ${COLUMNS}`);
  return revoked ?? findRunner(db, tenantId, id);
}
