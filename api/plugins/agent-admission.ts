// Admission to /api/agent/v1/* and /mcp before any route runs: 503
// temporarily_disabled while agent authentication is switched off
// (AGENT_AUTH_DISABLED), and a per-principal request limit answering 429
// with Retry-After and the SharedRateLimitError body. The limit is counted
// in each api replica's memory (a fixed window per principal): it guards the
// replica's own capacity, so it needs no database round trip per request.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { bearerToken } from '../../core/auth/platform-token.ts';
import { AgentHttpError } from '../errors.ts';

const MAX_TRACKED = 100_000;

async function agentAdmission(app: FastifyInstance) {
  const { agentAuthDisabled, agentRateLimit, agentRateWindowMs } = app.config.identity;
  const windows = new Map<string, { start: number; count: number }>();

  // The verified principal (cached verification, shared with the route's own
  // check), or the client IP for requests without a valid token.
  // One window per principal across both surfaces (Agent API and /mcp).
  const keyOf = async (request: FastifyRequest, mcp: boolean): Promise<string> => {
    const token = bearerToken(request.headers.authorization);
    const claims = token ? await (mcp ? app.mcpAuth.claims(token) : app.agentTokenClaims(token)) : null;
    return claims ? `p:${claims.principalId}` : `ip:${request.ip}`;
  };

  app.addHook('onRequest', async (request: FastifyRequest, reply: FastifyReply) => {
    // The matched route, not the raw URL: the router decodes the path, so
    // /m%63p reaches /mcp and must be admitted (or refused) like it.
    const route = request.routeOptions.url ?? '';
    const mcp = route === '/mcp';
    if (!mcp && !route.startsWith('/api/agent/v1')) return;
    if (agentAuthDisabled) {
      throw new AgentHttpError(503, 'temporarily_disabled', 'Agent authentication is switched off here for now; do not bypass it, retry later.', 'retry_later');
    }
    const now = Date.now();
    const key = await keyOf(request, mcp);
    let window = windows.get(key);
    if (!window || now - window.start >= agentRateWindowMs) {
      if (!window && windows.size >= MAX_TRACKED) windows.delete(windows.keys().next().value!);
      window = { start: now, count: 0 };
      windows.set(key, window);
    }
    window.count++;
    if (window.count > agentRateLimit) {
      const retryAfter = Math.max(0, Math.ceil((window.start + agentRateWindowMs - now) / 1000));
      // debug: a flood of refused requests must not become a flood of log lines
      request.log.debug({ retryAfter }, 'agent admission limit reached');
      return reply
        .code(429)
        .header('retry-after', String(retryAfter))
        .type('application/json; charset=utf-8')
        // Serialised here: the matched route's own 429 serializer must not reshape it.
        .send(
          JSON.stringify({
            code: 'rate_limit_exceeded',
            message: `At most ${agentRateLimit} requests per ${agentRateWindowMs / 1000} s; retry after ${retryAfter} s without changing identity or tenant data.`,
            next_action: 'retry_same_request_later',
            retry_after: retryAfter,
            limit: agentRateLimit,
            window_seconds: Math.round(agentRateWindowMs / 1000),
          }),
        );
    }
    return undefined;
  });
}

export default fp(agentAdmission, { name: 'agent-admission', dependencies: ['agent-auth'] });
