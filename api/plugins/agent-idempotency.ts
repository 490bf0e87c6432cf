// Idempotency-Key on every Agent API mutation (rule 5). Spread
// `...app.agentIdempotency()` into a route's options after
// `onRequest: app.requireAgent(scope)`:
//   - the key (8-200 characters) is required: 400 invalid_idempotency_key;
//   - keyed by principal and key; the fingerprint covers method, path, body;
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
import { AgentHttpError } from '../errors.ts';

const KEY = /^.{8,200}$/s;

type Claimed = { scope: string; tenantId: string; key: string; record: boolean };

declare module 'fastify' {
  interface FastifyRequest {
    agentIdempotency: Claimed | null;
  }
  interface FastifyInstance {
    agentIdempotency: () => {
      preHandler: (request: FastifyRequest, reply: FastifyReply) => Promise<unknown>;
      onSend: (request: FastifyRequest, reply: FastifyReply, payload: unknown) => Promise<unknown>;
      onError: (request: FastifyRequest, reply: FastifyReply, error: Error) => Promise<void>;
    };
  }
}

async function agentIdempotency(app: FastifyInstance) {
  app.decorateRequest('agentIdempotency', null);

  const preHandler = async (request: FastifyRequest, reply: FastifyReply) => {
    const agent = request.agent;
    if (!agent) throw new AgentHttpError(401, 'invalid_credential', 'Authenticate first.', 'reauthenticate');
    const key = request.headers['idempotency-key'];
    if (typeof key !== 'string' || !KEY.test(key)) {
      throw new AgentHttpError(400, 'invalid_idempotency_key', 'Send an Idempotency-Key header of 8-200 characters, unique to this exact mutation.', 'fix_request');
    }
    const claimed: Claimed = { scope: `agent:${agent.principalId}`, tenantId: agent.tenantId, key, record: true };
    const claim = await claimIdempotencyKey(app.db, {
      ...claimed,
      fingerprint: fingerprint({ method: request.method, path: request.url.split('?')[0], body: request.body ?? null }),
    });
    if (claim.kind === 'conflict') {
      throw new AgentHttpError(409, 'idempotency_conflict', 'This Idempotency-Key belongs to another request; use a new key for new work.', 'use_new_idempotency_key');
    }
    if (claim.kind === 'in_progress') {
      throw new AgentHttpError(409, 'idempotency_in_progress', 'The first request with this key is still running; retry it unchanged shortly.', 'retry_same_request_later');
    }
    if (claim.kind === 'replay') {
      return reply.code(claim.status).header('idempotency-replayed', 'true').type('application/json; charset=utf-8').send(claim.body);
    }
    request.agentIdempotency = claimed;
    return undefined;
  };

  const forget = (c: Claimed) =>
    app.db.query(sql.unsafe`delete from idempotency_records where scope = ${c.scope} and tenant_id = ${c.tenantId} and key = ${c.key}`);

  const onError = async (request: FastifyRequest, _reply: FastifyReply, error: Error) => {
    if (request.agentIdempotency && error instanceof AgentHttpError && !error.recordIdempotency) request.agentIdempotency.record = false;
  };

  const onSend = async (request: FastifyRequest, reply: FastifyReply, payload: unknown) => {
    const claimed = request.agentIdempotency;
    if (!claimed) return payload;
    request.agentIdempotency = null;
    if (!claimed.record || reply.statusCode >= 500) {
      await forget(claimed);
      return payload;
    }
    let body: unknown = payload;
    if (typeof payload === 'string') {
      try {
        body = JSON.parse(payload);
      } catch {
        body = payload;
      }
    }
    await recordIdempotentResponse(app.db, { ...claimed, status: reply.statusCode, body });
    return payload;
  };

  app.decorate('agentIdempotency', () => ({ preHandler, onSend, onError }));
}

export default fp(agentIdempotency, { name: 'agent-idempotency', dependencies: ['agent-auth'] });
