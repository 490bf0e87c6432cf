// Operator suspension of a tenant. A suspended tenant keeps all its data; its
// agents and people are refused (403 tenant_inactive) until it is resumed.
// The caches that decide those refusals hear the change by NOTIFY (0023).
import { z } from 'zod';
import { sql, type CommonQueryMethods } from '../db/pool.ts';

export const Suspension = z.object({ suspended_at: z.string().nullable(), suspended_reason: z.string().nullable() });
export type Suspension = z.infer<typeof Suspension>;

/** Suspends the tenant (keeping the first suspension time); null when there is no such tenant. */
export async function suspendTenant(
  db: CommonQueryMethods,
  tenantId: string,
  reason: string,
): Promise<Suspension | null> {
  return db.maybeOne(sql.type(Suspension)`
    update tenants set suspended_at = coalesce(suspended_at, now()), suspended_reason = ${reason.slice(0, 500)}
    where id = ${tenantId} returning suspended_at, suspended_reason`);
}

/** Lifts a suspension; null when there is no such tenant. */
export async function resumeTenant(db: CommonQueryMethods, tenantId: string): Promise<Suspension | null> {
  return db.maybeOne(sql.type(Suspension)`
    update tenants set suspended_at = null, suspended_reason = null
    where id = ${tenantId} returning suspended_at, suspended_reason`);
}
