// Use counts of the tools a tenant's agents have: Agent API operations (one
// per answered call) and skills (one per turn that offered the skill).
import { sql, type CommonQueryMethods } from '../db/pool.ts';

export const agentOperationTool = (operationId: string) => `agent:${operationId}`;
export const skillTool = (name: string) => `skill:${name}`;

export async function recordToolUses(db: CommonQueryMethods, tenantId: string, tools: readonly string[]): Promise<void> {
  if (tools.length === 0) return;
  // Sorted, so two turns of one tenant lock the rows in the same order.
  await db.query(sql.unsafe`
    insert into tool_uses (tenant_id, tool, uses)
    select ${tenantId}, t, 1 from unnest(${sql.array([...new Set(tools)].sort(), 'text')}) t order by t
    on conflict (tenant_id, tool) do update set uses = tool_uses.uses + 1, last_used_at = now()`);
}
