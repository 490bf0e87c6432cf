// Idempotency-Key on every Agent API mutation (rule 5), over HTTP and MCP.
// HTTP routes spread `...app.agentIdempotency()` into their options after
// `onRequest: app.requireAgent(scope)`; MCP tools call `app.agentKeys`
// directly with the key from their arguments. Both use one record per
// principal and key, and the same fingerprint (method, path, body), so the
// same mutation under the same key is the same request on either surface.
//   - the key (8-200 characters) is required: 400 invalid_idempotency_key;
//   - an identical retry within 24 hours gets the recorded status and body
//     (a recorded failure as the same failure) with Idempotency-Replayed: true,
//     and the operation does not run again;
//   - the key with another request: 409 idempotency_conflict; while the first
//     still runs: 409 idempotency_in_progress (the claim commits at once, so
//     of two identical requests at the same instant exactly one runs);
//   - a refusal thrown with recordIdempotency=false (readiness refusals) and
//     unexpected 5xx answers are not recorded: the identical retry runs.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { sql } from '../../core/db/pool.ts';
import { claimIdempotencyKey, fingerprint, recordIdempotentResponse } from '../../core/idempotency.ts';
import { AgentHttpError, IDEMPOTENCY_KEY_BOUNDS, INVALID_IDEMPOTENCY_KEY } from '../errors.ts';
import type { AgentPrincipal } from './agent-auth.ts';

type Claimed = { scope: string; tenantId: string; key: string; record: boolean };
type Claim = { kind: 'run'; claimed: Claimed } | { kind: 'replay'; status: number; body: unknown };
type Mutation = { method: string; path: string; body: unknown };

/** The key store both surfaces use. */
export type AgentKeys = {
  claim: (agent: AgentPrincipal, key: unknown, mutation: Mutation) => Promise<Claim>;
  /** Records the outcome (or drops the claim when it must not be recorded). */
  finish: (claimed: Claimed, status: number, body: unknown) => Promise<void>;
};

declare module 'fastify' {
  interface FastifyRequest {
    agentIdempotency: Claimed | null;
  }
  interface FastifyInstance {
    agentKeys: AgentKeys;
    agentIdempotency: () => {
      preHandler: (request: FastifyRequest, reply: FastifyReply) => Promise<unknown>;
      onSend: (request: FastifyRequest, reply: FastifyReply, payload: unknown) => Promise<unknown>;
      onError: (request: FastifyRequest, reply: FastifyReply, error: Error) => Promise<void>;
    };
  }
}

/** A route pattern with its :params filled in (encoded): the path a mutation is fingerprinted by. */
export function fillPath(pattern: string, params: Record<string, unknown> | undefined): string {
  return pattern.replace(/:([A-Za-z]+)/g, (_, name: string) => encodeURIComponent(String(params?.[name] ?? '')));
}

const validKey = (key: unknown): key is string =>
  typeof key === 'string' && key.length >= IDEMPOTENCY_KEY_BOUNDS.min && key.length <= IDEMPOTENCY_KEY_BOUNDS.max;

async function agentIdempotency(app: FastifyInstance) {
  app.decorateRequest('agentIdempotency', null);

  const forget = (c: Claimed) =>
    app.db.query(sql.unsafe`delete from idempotency_records where scope = ${c.scope} and tenant_id = ${c.tenantId} and key = ${c.key}`);

  const keys: AgentKeys = {
    async claim(agent, key, mutation) {
      if (!validKey(key)) throw new AgentHttpError(400, 'invalid_idempotency_key', INVALID_IDEMPOTENCY_KEY, 'fix_request');
      const claimed: Claimed = { scope: `agent:${agent.principalId}`, tenantId: agent.tenantId, key, record: true };
      const claim = await claimIdempotencyKey(app.db, {
        ...claimed,
        fingerprint: fingerprint({ method: mutation.method, path: mutation.path, body: mutation.body ?? null }),
      });
      if (claim.kind === 'conflict') {
        throw new AgentHttpError(409, 'idempotency_conflict', 'This Idempotency-Key belongs to another request; use a new key for new work.', 'use_new_idempotency_key');
      }
      if (claim.kind === 'in_progress') {
        throw new AgentHttpError(409, 'idempotency_in_progress', 'The first request with this key is still running; retry it unchanged shortly.', 'retry_same_request_later');
      }
      if (claim.kind === 'replay') return claim;
      return { kind: 'run', claimed };
    },
    async finish(claimed, status, body) {
      if (!claimed.record || status >= 500) await forget(claimed);
      else await recordIdempotentResponse(app.db, { ...claimed, status, body });
    },
  };
  app.decorate('agentKeys', keys);

  const preHandler = async (request: FastifyRequest, reply: FastifyReply) => {
    const agent = request.agent;
    if (!agent) throw new AgentHttpError(401, 'invalid_credential', 'Authenticate first.', 'reauthenticate');
    const claim = await keys.claim(agent, request.headers['idempotency-key'], {
      method: request.method,
      // Rebuilt from the route and its decoded params, as the MCP tools build it,
      // so however a client encodes the path the same mutation is the same request.
      path: fillPath(request.routeOptions.url ?? request.url, request.params as Record<string, unknown>),
      body: request.body,
    });
    if (claim.kind === 'replay') {
      return reply.code(claim.status).header('idempotency-replayed', 'true').type('application/json; charset=utf-8').send(claim.body);
    }
    request.agentIdempotency = claim.claimed;
    return undefined;
  };

  const onError = async (request: FastifyRequest, _reply: FastifyReply, error: Error) => {
    if (request.agentIdempotency && error instanceof AgentHttpError && !error.recordIdempotency) request.agentIdempotency.record = false;
  };

  const onSend = async (request: FastifyRequest, reply: FastifyReply, payload: unknown) => {
    const claimed = request.agentIdempotency;
    if (!claimed) return payload;
    request.agentIdempotency = null;
    let body: unknown = payload;
    if (typeof payload === 'string') {
      try {
        body = JSON.parse(payload);
      } catch {
        body = payload;
      }
    }
    await keys.finish(claimed, reply.statusCode, body);
    return payload;
  };

  app.decorate('agentIdempotency', () => ({ preHandler, onSend, onError }));
}

export default fp(agentIdempotency, { name: 'agent-idempotency', dependencies: ['agent-auth'] });
