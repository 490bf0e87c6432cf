// Counts uses of Agent API operations for /api/activity/tools: an answered
// (status < 400) call over HTTP or as an MCP tool adds one to the calling
// agent's tenant. Written after the answer, off the request's path.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { agentOperationTool, recordToolUses } from '../../../core/activity/tool-uses.ts';

function toolOf(request: FastifyRequest): string | null {
  const schema = request.routeOptions.schema as { operationId?: string; tags?: string[] } | undefined;
  if (schema?.tags?.includes('agent') && schema.operationId) return schema.operationId;
  const body = request.body as { method?: unknown; params?: { name?: unknown } } | undefined;
  if (request.routeOptions.url === '/mcp' && body?.method === 'tools/call' && typeof body.params?.name === 'string') return body.params.name.slice(0, 100);
  return null;
}

async function toolCounter(app: FastifyInstance) {
  app.addHook('onResponse', async (request, reply) => {
    if (reply.statusCode >= 400 || !request.agentContext) return;
    const tool = toolOf(request);
    if (!tool) return;
    await recordToolUses(app.db, request.agentContext.tenant_id, [agentOperationTool(tool)]).catch((err: unknown) => request.log.warn({ err }, 'tool use not counted'));
  });
}

export default fp(toolCounter, { name: 'activity-tool-counter', dependencies: ['context'] });
