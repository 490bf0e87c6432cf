// The tools the tenant's agents can use (Agent API operations, published
// skills and the tools they declare) with how often each was used.
import { toolUses } from '../../../core/activity/merged.ts';
import { listSkills } from '../../../core/skills/skills.ts';
import { agentOperations } from '../agent/operations.ts';
import { type ActivityApp, type ActivityRouteContext, badCursor } from './context.ts';
import { ActivityToolPage, Page } from './schemas.ts';

export function registerActivityToolRoutes(app: ActivityApp, { viewer, errors, common }: ActivityRouteContext): void {
  app.get(
    '/api/activity/tools',
    {
      ...viewer,
      schema: {
        ...common,
        operationId: 'listActivityTools',
        summary:
          "Tools the tenant's agents can use (Agent API/MCP operations, published skills and the tools they declare) with use counts",
        querystring: Page,
        response: { 200: ActivityToolPage, ...errors },
      },
    },
    async (request) => {
      const tenantId = request.tenant!.id;
      const [uses, skills] = await Promise.all([toolUses(app.db, tenantId), listSkills(app.db, tenantId, 'published')]);
      const declared = new Map<string, string[]>();
      for (const s of skills)
        for (const tool of s.allowed_tools) declared.set(tool, [...(declared.get(tool) ?? []), s.name]);
      const all = [
        ...agentOperations.map((op) => ({
          tool: `agent:${op.operationId}`,
          kind: 'agent_operation' as const,
          name: op.operationId,
          description: op.summary,
          skills: [] as string[],
        })),
        ...skills.map((s) => ({
          tool: `skill:${s.name}`,
          kind: 'skill' as const,
          name: s.name,
          description: s.description,
          skills: [s.name],
        })),
        ...[...declared].map(([tool, by]) => ({
          tool: `skill-tool:${tool}`,
          kind: 'skill_tool' as const,
          name: tool,
          description: `Declared by ${by.join(', ')}`,
          skills: by,
        })),
      ].sort((a, b) => (a.tool < b.tool ? -1 : 1));
      let after: string | null = null;
      if (request.query.cursor) {
        after = Buffer.from(request.query.cursor, 'base64url').toString('utf8');
        if (!/^(agent|skill|skill-tool):\S{1,200}$/.test(after)) throw badCursor();
      }
      const rest = after === null ? all : all.filter((x) => x.tool > after);
      const items = rest
        .slice(0, request.query.limit)
        .map((x) => ({ ...x, uses: uses.get(x.tool)?.uses ?? 0, lastUsedAt: uses.get(x.tool)?.last_used_at ?? null }));
      return {
        items,
        nextCursor: rest.length > request.query.limit ? Buffer.from(items.at(-1)!.tool).toString('base64url') : null,
      };
    },
  );
}
