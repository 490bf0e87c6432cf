// What a board's scope names: `company` is a company of the board's tenant,
// `agent` a configured agent of one of its companies (the company agents the
// Agent API lists). Another tenant's id, or one that names nothing, is
// refused exactly alike, so a scope check reveals nothing across tenants.
import { sql, type CommonQueryMethods } from '../db/pool.ts';
import { isUuid } from '../companies/paging.ts';
import type { ScopeType } from './boards.ts';

export class BoardScopeNotFoundError extends Error {
  override name = 'BoardScopeNotFoundError';
  constructor(public readonly scopeType: ScopeType) {
    super(
      scopeType === 'company'
        ? 'No company with this scope id in this workspace; scope id must be the id of one of its companies.'
        : 'No agent with this scope id in this workspace; scope id must be the id of one of its company agents.',
    );
  }
}

/**
 * True when the scope names a row of the tenant. The row is key-share locked
 * until the caller's transaction ends, so it cannot be deleted between this
 * check and the board's insert.
 */
export async function lockScope(
  tx: CommonQueryMethods,
  tenantId: string,
  scopeType: ScopeType,
  scopeId: string,
): Promise<boolean> {
  if (!isUuid(scopeId)) return false;
  const table = scopeType === 'company' ? sql.identifier(['companies']) : sql.identifier(['company_agents']);
  const found = await tx.query(
    sql.unsafe`select 1 from ${table} where id = ${scopeId} and tenant_id = ${tenantId} for key share`,
  );
  return found.rowCount === 1;
}
