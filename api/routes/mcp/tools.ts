// The Agent API operations as MCP tools: one tool per operation, named by
// its operationId, with the same scope, claimer role, guard, input bounds, idempotency
// record and error codes as the HTTP route, because it runs the same
// operation definition (api/routes/agent/operation.ts).
//
// Arguments are the operation's path, query and body fields side by side;
// mutations also take `idempotency_key`. A refusal is a tool result with
// isError and the AgentApiError body as JSON text (not structuredContent,
// which must match the tool's output schema).
import type { FastifyInstance } from 'fastify';
import type { CallToolResult, Tool } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { ROLE_TITLES } from '../../../core/tenants/roles.ts';
import { AgentHttpError, IDEMPOTENCY_KEY_BOUNDS, type AgentApiErrorBody } from '../../errors.ts';
import {
  concretePath,
  encoded,
  executeOperation,
  isMutation,
  requireClaimerRole,
  type AgentOperation,
  type Caller,
} from '../agent/operation.ts';
import { agentOperations } from '../agent/operations.ts';

const IdempotencyKey = z
  .string()
  .min(IDEMPOTENCY_KEY_BOUNDS.min)
  .max(IDEMPOTENCY_KEY_BOUNDS.max)
  .describe(
    'Unique to this exact mutation (8-200 characters); repeat it only to retry the identical call. Shared with the HTTP Idempotency-Key of the same operation.',
  );

type Parts = { params: string[]; query: string[]; body: string[]; input: z.ZodObject };

/** Which argument goes to which part of the operation; names never collide (checked at start). */
function partsOf(op: AgentOperation): Parts {
  const parts: Parts = {
    params: Object.keys(op.params?.shape ?? {}),
    query: Object.keys(op.query?.shape ?? {}),
    body: Object.keys(op.body?.shape ?? {}),
    input: inputSchemaOf(op),
  };
  const all = [...parts.params, ...parts.query, ...parts.body, 'idempotency_key'];
  if (new Set(all).size !== all.length)
    throw new Error(`MCP tool ${op.operationId}: argument names collide (${all.join(', ')})`);
  return parts;
}

const registryless = () => z.registry<{ id?: string }>();

/** JSON Schema (2020-12, the MCP default dialect) with every named schema inlined. */
function jsonSchema(schema: z.ZodType, io: 'input' | 'output'): Record<string, unknown> {
  const out = z.toJSONSchema(schema, { io, metadata: registryless(), unrepresentable: 'any' }) as Record<
    string,
    unknown
  >;
  delete out.$schema;
  // MCP wants an object at the root; a union of objects (publish) is one.
  if (out.type === undefined) out.type = 'object';
  return out;
}

function inputSchemaOf(op: AgentOperation): z.ZodObject {
  return z
    .object({
      ...(op.params?.shape ?? {}),
      ...(op.query?.shape ?? {}),
      ...(op.body?.shape ?? {}),
      ...(isMutation(op) ? { idempotency_key: IdempotencyKey } : {}),
    })
    .strict();
}

function toolOf(op: AgentOperation, parts: Parts): Tool {
  const notes = [
    op.description,
    op.scope ? `Scope: ${op.scope}.` : 'Any valid token.',
    op.role === 'viewer'
      ? ''
      : `Its claimer must be a ${ROLE_TITLES[op.role]}${op.role === 'admin' ? '' : ' or Admin'} of the workspace.`,
    `Same as ${op.method} ${op.path.replace(/:([A-Za-z]+)/g, '{$1}')}.`,
  ].filter(Boolean);
  return {
    name: op.operationId,
    title: op.mcp.title,
    description: `${op.summary}. ${notes.join(' ')}`,
    inputSchema: jsonSchema(parts.input, 'input') as Tool['inputSchema'],
    outputSchema: jsonSchema(op.response, 'output') as Tool['outputSchema'],
    annotations: {
      title: op.mcp.title,
      readOnlyHint: op.mcp.readOnly,
      destructiveHint: op.mcp.destructive ?? false,
      // An identical call under the same idempotency_key returns the recorded outcome.
      idempotentHint: true,
      openWorldHint: false,
    },
  };
}

const success = (body: unknown, replayed = false): CallToolResult => ({
  content: [{ type: 'text', text: JSON.stringify(body) }],
  structuredContent: body as Record<string, unknown>,
  ...(replayed ? { _meta: { idempotency_replayed: true } } : {}),
});
const failure = (body: AgentApiErrorBody | unknown, replayed = false): CallToolResult => ({
  isError: true,
  content: [{ type: 'text', text: JSON.stringify(body) }],
  ...(replayed ? { _meta: { idempotency_replayed: true } } : {}),
});

/** Argument errors read like the HTTP route's validation errors (a bad key has its own code, as over HTTP). */
function invalid(error: z.ZodError): AgentHttpError {
  if (error.issues.some((issue) => issue.path[0] === 'idempotency_key')) {
    return new AgentHttpError(
      400,
      'invalid_idempotency_key',
      'Pass idempotency_key: 8-200 characters, unique to this exact mutation.',
      'fix_request',
    );
  }
  const details = error.issues.map((issue) => ({
    path: ['arguments', ...issue.path.map(String)].join('.'),
    message: issue.code === 'unrecognized_keys' ? `unknown argument(s): ${issue.keys.join(', ')}` : issue.message,
  }));
  const first = details[0];
  return new AgentHttpError(
    400,
    'invalid_request',
    first ? `Invalid request: ${first.path}: ${first.message}` : 'Invalid request.',
    'fix_request',
    {},
    true,
    details,
  );
}

function parseInput(op: AgentOperation, parts: Parts, args: Record<string, unknown>) {
  const parsed = parts.input.safeParse(args);
  if (!parsed.success) throw invalid(parsed.error);
  const pick = (keys: string[], schema: z.ZodObject | undefined) => {
    if (!schema) return undefined;
    const picked = Object.fromEntries(keys.filter((k) => k in args).map((k) => [k, args[k]]));
    const result = schema.safeParse(picked);
    if (!result.success) throw invalid(result.error);
    return result.data;
  };
  return { params: pick(parts.params, op.params), query: pick(parts.query, op.query), body: pick(parts.body, op.body) };
}

export type ToolSet = {
  tools: Tool[];
  scopeOf: (name: string) => AgentOperation['scope'];
  call: (caller: Caller, name: string, args: Record<string, unknown>) => Promise<CallToolResult>;
};

/** Built once per app: the tool list and the dispatcher. */
export function agentTools(app: FastifyInstance): ToolSet {
  const byName = new Map(agentOperations.map((op) => [op.operationId, { op, parts: partsOf(op) }]));
  const tools = [...byName.values()].map(({ op, parts }) => toolOf(op, parts));

  async function run(
    caller: Caller,
    op: AgentOperation,
    parts: Parts,
    args: Record<string, unknown>,
  ): Promise<CallToolResult> {
    if (op.scope && !caller.agent.scopes.includes(op.scope))
      throw app.mcpAuth.scopeDenied(op.scope, caller.agent.claimState);
    requireClaimerRole(op, caller);
    op.guard?.(caller);
    const input = parseInput(op, parts, args);
    if (!isMutation(op)) return success(encoded(op, await executeOperation(app, op, caller, input, null)));

    const claim = await app.agentKeys.claim(caller.agent, args.idempotency_key, {
      method: op.method,
      path: concretePath(op, input.params),
      body: input.body,
    });
    if (claim.kind === 'replay') return claim.status < 400 ? success(claim.body, true) : failure(claim.body, true);
    let status: number;
    let body: unknown;
    try {
      body = encoded(op, await executeOperation(app, op, caller, input, claim.claimed));
      status = op.status ?? 200;
    } catch (error) {
      if (!(error instanceof AgentHttpError)) {
        await app.agentKeys.finish(claim.claimed, 500, null);
        throw error;
      }
      if (!error.recordIdempotency) claim.claimed.record = false;
      status = error.status;
      body = error.body();
    }
    await app.agentKeys.finish(claim.claimed, status, body);
    return status < 400 ? success(body) : failure(body);
  }

  return {
    tools,
    scopeOf: (name) => byName.get(name)?.op.scope,
    async call(caller, name, args) {
      const entry = byName.get(name);
      if (!entry)
        return failure({
          code: 'invalid_request',
          message: `No tool named ${name}; list the tools.`,
          next_action: 'fix_request',
        });
      try {
        return await run(caller, entry.op, entry.parts, args);
      } catch (error) {
        if (error instanceof AgentHttpError) return failure(error.body());
        caller.log.error({ err: error, tool: name }, 'mcp tool failed');
        return failure({
          code: 'internal_error',
          message: 'Unexpected server error; retry the same call later.',
          next_action: 'retry_later',
        });
      }
    },
  };
}
