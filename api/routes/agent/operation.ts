// One definition per Agent API operation, served twice: as an HTTP route
// under /api/agent/v1 (registerHttpOperation) and as an MCP tool at /mcp
// (api/routes/mcp). Both run the same guard and the same `run`, so the MCP
// endpoint has no second implementation of any operation: same checks, same
// core calls, same error codes. Each operation declares the role its agent's
// claimer needs in the workspace (`role`, published as `x-claimer-role`): a
// claimed agent never acts above the person who claimed it.
import type { FastifyBaseLogger, FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { Transactor } from '../../../core/db/pool.ts';
import type { AgentScope } from '../../../core/identity/tokens.ts';
import type { AgentAccess, AgentContextRow } from '../../../core/agent/capabilities.ts';
import { ROLE_TITLES, roleAtLeast, type TenantRole } from '../../../core/tenants/roles.ts';
import { AgentHttpError, IDEMPOTENCY_KEY_BOUNDS } from '../../errors.ts';
import type { AgentPrincipal } from '../../plugins/agent-auth.ts';
import { fillPath, type Claimed } from '../../plugins/agent-idempotency.ts';

/** Who calls: the verified principal and its live registration context. */
export type Caller = { agent: AgentPrincipal; context: AgentContextRow; log: FastifyBaseLogger };

type Obj = z.ZodObject;
type Out<T> = T extends z.ZodType ? z.output<T> : undefined;

export type AgentOperation<
  P extends Obj | undefined = Obj | undefined,
  Q extends Obj | undefined = Obj | undefined,
  B extends Obj | undefined = Obj | undefined,
> = {
  operationId: string;
  method: 'GET' | 'POST' | 'PUT';
  /** Fastify path with :params. */
  path: string;
  scope?: AgentScope;
  /**
   * The role the person who claimed the agent needs in the workspace, read
   * at each request: reads need a Viewer, changes a Member, as the platform
   * routes doing the same work. An unclaimed agent has no person: its scopes decide.
   */
  role: TenantRole;
  summary: string;
  description?: string;
  params?: P;
  query?: Q;
  body?: B;
  response: z.ZodType;
  /** Success status (200 unless said). */
  status?: 200 | 201;
  /** Error statuses with their body schemas, as the spec lists them per endpoint. */
  errors: Record<number, z.ZodType>;
  /** Checked after authentication and before the input is read (company reads: claim, then plan). */
  guard?: (caller: Caller) => void;
  /** MCP tool title and hints; the tool name is the operationId. */
  mcp: { title: string; readOnly: boolean; destructive?: boolean };
  /**
   * `db` is where the operation reads and writes: for a mutation, the
   * transaction its Idempotency-Key answer is recorded in, so its effects and
   * that answer commit together (a process that dies in between leaves
   * neither); for a read, the pool.
   */
  run: (
    app: FastifyInstance,
    caller: Caller,
    input: { params: Out<P>; query: Out<Q>; body: Out<B> },
    db: Transactor,
  ) => Promise<unknown>;
};

/** Every defined operation's claimer role, for capabilities (which cannot import the list: it is in it). */
const declaredRoles = new Map<string, TenantRole>();

/** Keeps each operation's input types while the list holds them all. */
export function defineOperation<
  P extends Obj | undefined = undefined,
  Q extends Obj | undefined = undefined,
  B extends Obj | undefined = undefined,
>(op: AgentOperation<P, Q, B>): AgentOperation {
  declaredRoles.set(op.operationId, op.role);
  return op as unknown as AgentOperation;
}

/** What an agent whose claimer has this role may do (null: unclaimed, nobody to follow). */
export function accessOf(claimerRole: TenantRole | null): AgentAccess {
  const entries = [...declaredRoles];
  const may = (needs: TenantRole) => claimerRole === null || roleAtLeast(claimerRole, needs);
  return {
    claimer_role: claimerRole,
    allowed: entries.filter(([, needs]) => may(needs)).map(([id]) => id),
    refused: entries.filter(([, needs]) => !may(needs)).map(([operation, needs]) => ({ operation, needs })),
  };
}

/**
 * 403 insufficient_role when the agent's claimer lacks the operation's role.
 * Checked before the Idempotency-Key is claimed, so nothing is recorded and
 * the identical retry runs once an Admin has raised the role.
 */
export function requireClaimerRole(op: AgentOperation, { agent }: Caller): void {
  if (agent.role === null || roleAtLeast(agent.role, op.role)) return;
  const needed = op.role === 'admin' ? 'an Admin' : `a ${ROLE_TITLES[op.role]} (or Admin)`;
  throw new AgentHttpError(
    403,
    'insufficient_role',
    `${op.operationId} needs the person who claimed this agent to be ${needed} of the workspace; they are a ${ROLE_TITLES[agent.role]}. Ask a workspace Admin to raise their role, then send the same request again.`,
    'raise_claimer_role',
    {},
    false,
  );
}

export const isMutation = (op: AgentOperation) => op.method !== 'GET';

/** The concrete path of an operation with its params filled in, as a client would send it. */
export const concretePath = (op: AgentOperation, params: Record<string, unknown> | undefined): string =>
  fillPath(op.path, params);

/** The authenticated caller of an HTTP request (after app.requireAgent). */
export const callerOf = (request: FastifyRequest): Caller => {
  if (!request.agent || !request.agentContext)
    throw new AgentHttpError(401, 'invalid_credential', 'Authenticate first.', 'reauthenticate');
  return { agent: request.agent, context: request.agentContext, log: request.log };
};

/** An operation's answer as it goes out (and is recorded): through its response schema, as JSON. */
export const encoded = (op: AgentOperation, result: unknown): unknown =>
  JSON.parse(JSON.stringify(z.encode(op.response, result as never)));

type Input = { params: unknown; query: unknown; body: unknown };

/**
 * Runs an operation and returns its result. A mutation runs in one
 * transaction that also records its answer under the claimed
 * Idempotency-Key (refused, and undone, when the claim was taken over
 * meanwhile); `claimed` is null for a read.
 */
export async function executeOperation(
  app: FastifyInstance,
  op: AgentOperation,
  caller: Caller,
  input: Input,
  claimed: Claimed | null,
): Promise<unknown> {
  if (!claimed) return op.run(app, caller, input as never, app.db);
  const { result } = await app.agentKeys.runRecorded(claimed, op.status ?? 200, async (tx) => {
    const result = await op.run(app, caller, input as never, tx);
    return { result, body: encoded(op, result) };
  });
  return result;
}

/** Serves an operation as an HTTP route of the Agent API. */
export function registerHttpOperation(app: FastifyInstance, op: AgentOperation): void {
  const guard = op.guard;
  app.route({
    method: op.method,
    url: op.path,
    onRequest: [
      app.requireAgent(op.scope),
      async (request: FastifyRequest) => requireClaimerRole(op, callerOf(request)),
      ...(guard ? [async (request: FastifyRequest) => guard(callerOf(request))] : []),
    ],
    ...(isMutation(op) ? app.agentIdempotency() : {}),
    schema: {
      operationId: op.operationId,
      tags: ['agent'],
      summary: op.summary,
      ...(op.description ? { description: op.description } : {}),
      security: [{ AgentBearer: op.scope ? [op.scope] : [] }],
      'x-claimer-role': op.role,
      ...(op.params ? { params: op.params } : {}),
      ...(op.query ? { querystring: op.query } : {}),
      ...(op.body ? { body: op.body } : {}),
      ...(isMutation(op)
        ? {
            headers: z.looseObject({
              'idempotency-key': z
                .string()
                .min(IDEMPOTENCY_KEY_BOUNDS.min)
                .max(IDEMPOTENCY_KEY_BOUNDS.max)
                .describe(
                  'Unique to this exact mutation; an identical retry within 24 hours returns the recorded outcome',
                ),
            }),
          }
        : {}),
      response: { [op.status ?? 200]: op.response, ...op.errors },
    },
    handler: async (request, reply) => {
      const { params, query, body } = request;
      // Fastify's serializer encodes the result as `encoded` does.
      const result = await executeOperation(
        app,
        op,
        callerOf(request),
        { params, query, body },
        isMutation(op) ? request.agentIdempotency : null,
      );
      if (op.status) reply.code(op.status);
      return result;
    },
  });
}
