// Counts uses of Agent API operations for /api/activity/tools: an answered
// (status < 400) call over HTTP or as an MCP tool adds one to the calling
// agent's tenant. Counted in memory and written once a second (and at close)
// in one statement: a write per call would put a hot row on every Agent API
// request (one agent's calls all update the same row). A process killed
// without closing loses at most the last second of counts.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { addToolUses, agentOperationTool } from '../../../core/activity/tool-uses.ts';

const FLUSH_MS = 1_000;

function toolOf(request: FastifyRequest): string | null {
  const schema = request.routeOptions.schema as { operationId?: string; tags?: string[] } | undefined;
  if (schema?.tags?.includes('agent') && schema.operationId) return schema.operationId;
  const body = request.body as { method?: unknown; params?: { name?: unknown } } | undefined;
  if (request.routeOptions.url === '/mcp' && body?.method === 'tools/call' && typeof body.params?.name === 'string')
    return body.params.name.slice(0, 100);
  return null;
}

async function toolCounter(app: FastifyInstance) {
  let pending = new Map<string, { tenantId: string; tool: string; uses: number }>();
  const flush = async () => {
    if (pending.size === 0) return;
    const batch = [...pending.values()];
    pending = new Map();
    await addToolUses(app.db, batch).catch((err: unknown) =>
      app.log.warn({ err, counts: batch.length }, 'tool uses not counted'),
    );
  };
  const timer = setInterval(() => void flush(), FLUSH_MS);
  timer.unref();
  app.addHook('onClose', async () => {
    clearInterval(timer);
    await flush();
  });

  const count = (request: FastifyRequest, status: number) => {
    if (status >= 400 || !request.agentContext) return;
    const tool = toolOf(request);
    if (!tool) return;
    const name = agentOperationTool(tool);
    const key = `${request.agentContext.tenant_id}\n${name}`;
    const entry = pending.get(key);
    if (entry) entry.uses++;
    else pending.set(key, { tenantId: request.agentContext.tenant_id, tool: name, uses: 1 });
  };
  // A callback, not async: every request runs it (see the onSend hook in app.ts).
  app.addHook('onResponse', (request, reply, done) => {
    count(request, reply.statusCode);
    done();
  });
}

export default fp(toolCounter, { name: 'activity-tool-counter', dependencies: ['context'] });
