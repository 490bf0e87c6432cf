// Use counts of the tools a tenant's agents have: Agent API operations (one
// per answered call) and skills (one per turn that offered the skill).
import { sql, type CommonQueryMethods } from '../db/pool.ts';

export const agentOperationTool = (operationId: string) => `agent:${operationId}`;
export const skillTool = (name: string) => `skill:${name}`;

/** Adds counts (tenant, tool, n) in one statement, rows locked in a fixed order. */
export async function addToolUses(
  db: CommonQueryMethods,
  counts: ReadonlyArray<{ tenantId: string; tool: string; uses: number }>,
): Promise<void> {
  if (counts.length === 0) return;
  const sorted = [...counts].sort((a, b) => (a.tenantId + a.tool < b.tenantId + b.tool ? -1 : 1));
  await db.query(sql.unsafe`
    insert into tool_uses (tenant_id, tool, uses)
    select t, tool, n from unnest(${sql.array(
      sorted.map((c) => c.tenantId),
      'uuid',
    )}::uuid[], ${sql.array(
      sorted.map((c) => c.tool),
      'text',
    )}::text[],
      ${sql.array(
        sorted.map((c) => c.uses),
        'int4',
      )}::int[]) as u(t, tool, n)
    on conflict (tenant_id, tool) do update set uses = tool_uses.uses + excluded.uses, last_used_at = now()`);
}

export async function recordToolUses(
  db: CommonQueryMethods,
  tenantId: string,
  tools: readonly string[],
): Promise<void> {
  if (tools.length === 0) return;
  // Sorted, so two turns of one tenant lock the rows in the same order.
  await db.query(sql.unsafe`
    insert into tool_uses (tenant_id, tool, uses)
    select ${tenantId}, t, 1 from unnest(${sql.array([...new Set(tools)].sort(), 'text')}) t order by t
    on conflict (tenant_id, tool) do update set uses = tool_uses.uses + 1, last_used_at = now()`);
}
