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
//   - the claim carries a lease of AGENT_IDEMPOTENCY_LEASE_MS that its request
//     renews every third of it until it finishes, so only a claim whose owner
//     died (crash, kill -9, lost host) stops being renewed; the identical
//     retry after the lease takes it over (core/idempotency.ts);
//   - a mutation that succeeds records its answer in its own transaction
//     (runRecorded), fenced by the claim's owner: effects and answer commit
//     together, so a process that dies at any point leaves either both (the
//     retry replays) or neither (the retry runs it once), and a request whose
//     claim was taken over while it ran is undone (409 idempotency_in_progress)
//     instead of running twice. A refusal changed nothing, so it is recorded
//     after it is sent; losing that record only lets the retry run;
//   - a refusal thrown with recordIdempotency=false (readiness refusals) and
//     unexpected 5xx answers are not recorded: the identical retry runs;
//   - the recorded answer is sealed with the data key (AES-256-GCM, bound to
//     its record): answers such as publish and rotate-link carry a board's
//     link secret, which is otherwise kept only as a SHA-256 hash. A replay
//     opens it and answers it in full; one whose data key has been retired
//     since is refused (409 idempotency_conflict, use a new key).
import { randomUUID } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { Keyring } from '../../core/crypto/keyring.ts';
import type { DatabaseTransactionConnection } from '../../core/db/pool.ts';
import { isDatabaseUnavailable } from '../../core/db/unavailable.ts';
import {
  claimIdempotencyKey,
  fingerprint,
  recordIdempotentResponse,
  releaseIdempotencyClaim,
  renewIdempotencyLease,
} from '../../core/idempotency.ts';
import { AgentHttpError, IDEMPOTENCY_KEY_BOUNDS, INVALID_IDEMPOTENCY_KEY } from '../errors.ts';
import type { AgentPrincipal } from './agent-auth.ts';

export type Claimed = {
  scope: string;
  tenantId: string;
  key: string;
  record: boolean;
  /** The answer was recorded with the operation's effects: nothing is left to record. */
  recorded: boolean;
  owner: string;
  stopRenewing: () => void;
};
type Claim = { kind: 'run'; claimed: Claimed } | { kind: 'replay'; status: number; body: unknown };
type Mutation = { method: string; path: string; body: unknown };

/** The key store both surfaces use. */
export type AgentKeys = {
  claim: (agent: AgentPrincipal, key: unknown, mutation: Mutation) => Promise<Claim>;
  /**
   * Runs a mutation in one transaction that ends by recording its answer
   * (`status` and the `body` it returns) under the claim.
   */
  runRecorded: <T extends { body: unknown }>(
    claimed: Claimed,
    status: number,
    operate: (tx: DatabaseTransactionConnection) => Promise<T>,
  ) => Promise<T>;
  /** Stops renewing the lease and records a refusal (or drops the claim when it must not be recorded). */
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
      onResponse: (request: FastifyRequest) => Promise<void>;
    };
  }
}

/** A route pattern with its :params filled in (encoded): the path a mutation is fingerprinted by. */
export function fillPath(pattern: string, params: Record<string, unknown> | undefined): string {
  return pattern.replace(/:([A-Za-z]+)/g, (_, name: string) => encodeURIComponent(String(params?.[name] ?? '')));
}

const validKey = (key: unknown): key is string =>
  typeof key === 'string' && key.length >= IDEMPOTENCY_KEY_BOUNDS.min && key.length <= IDEMPOTENCY_KEY_BOUNDS.max;

/** A recorded answer at rest: `{"$sealed": "<key id>:<ciphertext>"}`. */
const SEALED = '$sealed';
const recordName = (c: { scope: string; tenantId: string; key: string }) =>
  `idempotency:${c.scope}:${c.tenantId}:${c.key}`;

async function agentIdempotency(app: FastifyInstance) {
  app.decorateRequest('agentIdempotency', null);
  const keyring = Keyring.fromConfig(app.config);
  const sealBody = (c: Claimed, body: unknown) => ({
    [SEALED]: keyring.sealPacked(JSON.stringify(body ?? null), recordName(c)),
  });
  /** The recorded answer; records from before sealing are plain. */
  const openBody = (c: { scope: string; tenantId: string; key: string }, body: unknown): unknown => {
    const sealed = body && typeof body === 'object' ? (body as Record<string, unknown>)[SEALED] : undefined;
    if (typeof sealed !== 'string') return body;
    try {
      return JSON.parse(keyring.openPacked(sealed, recordName(c)));
    } catch (error) {
      app.log.warn(
        { err: error, idempotencyKey: c.key, scope: c.scope },
        'a recorded answer could not be opened (its data key is retired?)',
      );
      throw new AgentHttpError(
        409,
        'idempotency_conflict',
        'The answer recorded for this Idempotency-Key can no longer be read; use a new key.',
        'use_new_idempotency_key',
      );
    }
  };

  const leaseMs = app.config.identity.idempotencyLeaseMs;

  /**
   * Renews the claim every third of the lease while its request runs (a
   * request shorter than that costs no query). Stops once the claim is not
   * its own any more; a failed renewal is retried at the next tick.
   */
  function renewWhileRunning(c: Omit<Claimed, 'stopRenewing'>): () => void {
    let stopped = false;
    let timer: NodeJS.Timeout | undefined;
    const tick = async () => {
      try {
        const held = await renewIdempotencyLease(app.db, { ...c, lease: { owner: c.owner, ms: leaseMs } });
        if (!held) {
          if (!stopped)
            app.log.warn(
              { idempotencyKey: c.key, scope: c.scope },
              'idempotency claim lost while its request runs (taken over after a missed lease)',
            );
          stopped = true;
        }
      } catch (error) {
        app.log.warn({ err: error, idempotencyKey: c.key }, 'could not renew an idempotency lease; retrying');
      }
      schedule();
    };
    const schedule = () => {
      if (stopped) return;
      timer = setTimeout(() => void tick(), leaseMs / 3);
      timer.unref();
    };
    schedule();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }

  const keys: AgentKeys = {
    async claim(agent, key, mutation) {
      if (!validKey(key))
        throw new AgentHttpError(400, 'invalid_idempotency_key', INVALID_IDEMPOTENCY_KEY, 'fix_request');
      const id = {
        scope: `agent:${agent.principalId}`,
        tenantId: agent.tenantId,
        key,
        record: true,
        recorded: false,
        owner: randomUUID(),
      };
      const claim = await claimIdempotencyKey(app.db, {
        ...id,
        fingerprint: fingerprint({ method: mutation.method, path: mutation.path, body: mutation.body ?? null }),
        lease: { owner: id.owner, ms: leaseMs },
      });
      if (claim.kind === 'conflict') {
        throw new AgentHttpError(
          409,
          'idempotency_conflict',
          'This Idempotency-Key belongs to another request; use a new key for new work.',
          'use_new_idempotency_key',
        );
      }
      if (claim.kind === 'in_progress') {
        throw new AgentHttpError(
          409,
          'idempotency_in_progress',
          'The first request with this key is still running; retry it unchanged shortly.',
          'retry_same_request_later',
        );
      }
      if (claim.kind === 'replay') return { kind: 'replay', status: claim.status, body: openBody(id, claim.body) };
      return { kind: 'run', claimed: { ...id, stopRenewing: renewWhileRunning(id) } };
    },
    async runRecorded(claimed, status, operate) {
      const done = await app.db.transaction(async (tx) => {
        const value = await operate(tx);
        // Stopped before the record: a renewal now would wait on its row lock
        // and then find the claim completed.
        claimed.stopRenewing();
        const own = await recordIdempotentResponse(tx, { ...claimed, status, body: sealBody(claimed, value.body) });
        if (!own) {
          app.log.warn(
            { idempotencyKey: claimed.key, scope: claimed.scope },
            'idempotency claim was taken over while its request ran; its effects are undone',
          );
          throw new AgentHttpError(
            409,
            'idempotency_in_progress',
            'Another attempt of this request took it over; retry it unchanged shortly for its answer.',
            'retry_same_request_later',
            {},
            false,
          );
        }
        return value;
      });
      claimed.recorded = true;
      return done;
    },
    async finish(claimed, status, body) {
      // Stopped before the write: if the write fails, the claim lapses after
      // its lease instead of being renewed for as long as the process lives.
      claimed.stopRenewing();
      if (claimed.recorded) return;
      const release = !claimed.record || status >= 500;
      let own: boolean;
      try {
        own = release
          ? await releaseIdempotencyClaim(app.db, claimed)
          : await recordIdempotentResponse(app.db, { ...claimed, status, body: sealBody(claimed, body) });
      } catch (error) {
        // Never fails the response: this runs as it is sent (a 503 may be going out already).
        if (!isDatabaseUnavailable(error)) throw error;
        app.log.warn(
          { idempotencyKey: claimed.key, scope: claimed.scope, reason: (error as Error).message },
          'database unreachable: the idempotency claim lapses after its lease',
        );
        return;
      }
      if (!own)
        app.log.warn(
          { idempotencyKey: claimed.key, scope: claimed.scope },
          'idempotency claim was taken over before its request finished; outcome not recorded',
        );
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
      return reply
        .code(claim.status)
        .header('idempotency-replayed', 'true')
        .type('application/json; charset=utf-8')
        .send(claim.body);
    }
    request.agentIdempotency = claim.claimed;
    return undefined;
  };

  const onError = async (request: FastifyRequest, _reply: FastifyReply, error: Error) => {
    if (request.agentIdempotency && error instanceof AgentHttpError && !error.recordIdempotency)
      request.agentIdempotency.record = false;
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

  // Backstop: a response that went out without our onSend (it always runs
  // today) must not leave its claim renewed for the life of the process.
  const onResponse = async (request: FastifyRequest) => {
    const claimed = request.agentIdempotency;
    if (!claimed) return;
    request.agentIdempotency = null;
    claimed.record = false;
    await keys.finish(claimed, 500, null);
  };

  app.decorate('agentIdempotency', () => ({ preHandler, onSend, onError, onResponse }));
}

export default fp(agentIdempotency, { name: 'agent-idempotency', dependencies: ['agent-auth'] });
