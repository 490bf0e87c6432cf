// Admission to /api/agent/v1/* and /mcp before any route runs: 503
// temporarily_disabled while agent authentication is switched off
// (AGENT_AUTH_DISABLED), and a per-principal request limit answering 429
// with Retry-After and the SharedRateLimitError body. The limit is shared by
// every api replica (a fixed window per principal, leased from PostgreSQL in
// blocks of AGENT_API_RATE_LEASE tokens; see core/agent/admission.ts), so it
// needs no database round trip per request.
import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import fp from 'fastify-plugin';
import { SharedAdmission } from '../../core/agent/admission.ts';
import { bearerToken } from '../../core/auth/platform-token.ts';
import { AgentHttpError } from '../errors.ts';

async function agentAdmission(app: FastifyInstance) {
  const { agentAuthDisabled, agentRateLimit, agentRateWindowMs, agentRateLease } = app.config.identity;
  const admission = new SharedAdmission(
    app.db,
    { limit: agentRateLimit, windowMs: agentRateWindowMs, lease: agentRateLease },
    app.log,
  );

  // The verified principal (cached verification, shared with the route's own
  // check), or the client IP for requests without a valid token.
  // One window per principal across both surfaces (Agent API and /mcp).
  const keyOf = async (request: FastifyRequest, mcp: boolean): Promise<string> => {
    const token = bearerToken(request.headers.authorization);
    const claims = token ? await (mcp ? app.mcpAuth.claims(token) : app.agentTokenClaims(token)) : null;
    return claims ? `p:${claims.principalId}` : `ip:${request.ip}`;
  };

  /** Whether it answered the request (429); throws the 503 while agent auth is off. */
  const admit = async (request: FastifyRequest, reply: FastifyReply, mcp: boolean): Promise<boolean> => {
    if (agentAuthDisabled) {
      throw new AgentHttpError(
        503,
        'temporarily_disabled',
        'Agent authentication is switched off here for now; do not bypass it, retry later.',
        'retry_later',
      );
    }
    const key = await keyOf(request, mcp);
    if (!(await admission.admit(key))) {
      // To the end of the fixed window, which every replica shares.
      const retryAfter = admission.retryAfterSeconds();
      // debug: a flood of refused requests must not become a flood of log lines
      request.log.debug({ retryAfter }, 'agent admission limit reached');
      reply
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
      return true;
    }
    return false;
  };

  // A callback hook: the other routes pass at once, without the promise an
  // async hook costs every request.
  app.addHook('onRequest', (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => {
    // The matched route, not the raw URL: the router decodes the path, so
    // /m%63p reaches /mcp and must be admitted (or refused) like it.
    const route = request.routeOptions.url ?? '';
    const mcp = route === '/mcp';
    if (!mcp && !route.startsWith('/api/agent/v1')) return done();
    // An answered (refused) request goes no further: no done() then.
    admit(request, reply, mcp).then((answered) => answered || done(), done);
  });
}

export default fp(agentAdmission, { name: 'agent-admission', dependencies: ['agent-auth'] });
