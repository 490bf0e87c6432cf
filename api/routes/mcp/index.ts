// The remote MCP endpoint at {base_url}/mcp (Streamable HTTP, MCP
// 2025-11-25) on the official SDK. Stateless: every POST gets its own SDK
// server and transport answering in plain JSON, so any api replica can take
// any request and nothing lives in memory between them.
//
// Authorization (MCP spec, "Authorization"): every request carries a bearer
// token whose audience is {base_url}/mcp; a token for /api/agent is refused
// (no passthrough). Without a valid one: 401 with WWW-Authenticate naming the
// protected-resource metadata. A tools/call for a tool whose scope the token
// lacks: 403 with error="insufficient_scope" and the scope, before the SDK
// sees it. The token never leaves this process, and no URL carries it.
import type { IncomingMessage } from 'node:http';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
import { CallToolRequestSchema, ListResourcesRequestSchema, ListToolsRequestSchema, ReadResourceRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { AgentHttpError } from '../../errors.ts';
import type { AuthenticatedAgent } from '../../plugins/agent-auth.ts';
import type { Caller } from '../agent/operation.ts';
import { contractResources } from './resources.ts';
import { agentTools } from './tools.ts';

const INSTRUCTIONS =
  'Tools mirror the Agent API (/api/agent/v1): same scopes, refusal codes and next actions. Call getAgentCapabilities first and follow its next_actions. ' +
  'Mutating tools need an idempotency_key (8-200 characters) unique to the exact call; repeat it only to retry that call. ' +
  'A refusal is a tool error whose text is JSON {code, message, next_action}. URLs meant for a person (approve_url, claim pages) go to the user; never attach a token to them. ' +
  'Contract documents (OpenAPI, Arazzo, auth.md, llms.txt, knowledge manifest) are resources.';

/** The scope a tools/call needs, when the body is one. */
function requestedTool(body: unknown): string | null {
  if (!body || typeof body !== 'object' || Array.isArray(body)) return null;
  const message = body as { method?: unknown; params?: { name?: unknown } };
  return message.method === 'tools/call' && typeof message.params?.name === 'string' ? message.params.name : null;
}

const mcpRoutes: FastifyPluginAsync = async (app) => {
  const tools = agentTools(app);
  const scopes = new Map(tools.tools.map((t) => [t.name, tools.scopeOf(t.name)]));
  const allowedOrigin = new URL(app.config.baseUrl).origin;
  // Shared: the SDK's default builds a new Ajv for every Server, which halved
  // the requests per second of this per-request-server endpoint (measured).
  const jsonSchemaValidator = new AjvJsonSchemaValidator();

  /** Browser-originated requests from other sites are refused (DNS rebinding guard). */
  const checkOrigin = (request: FastifyRequest) => {
    const origin = request.headers.origin;
    if (origin !== undefined && origin !== allowedOrigin) {
      throw new AgentHttpError(403, 'origin_not_allowed', `Requests from the origin ${origin} are not accepted; call /mcp from a server-side client.`, 'fix_request');
    }
  };

  const authenticate = async (request: FastifyRequest): Promise<AuthenticatedAgent> => {
    checkOrigin(request);
    const who = await app.mcpAuth.authenticate(request.headers.authorization);
    const tool = requestedTool(request.body);
    const scope = tool ? scopes.get(tool) : undefined;
    if (scope && !who.agent.scopes.includes(scope)) throw app.mcpAuth.scopeDenied(scope, who.agent.claimState);
    return who;
  };

  const serve = async (request: FastifyRequest, reply: FastifyReply) => {
    const { agent, context } = await authenticate(request);
    const caller: Caller = { agent, context, log: request.log.child({ principalId: agent.principalId }) };
    const server = new Server({ name: 'agent-platform', title: 'Agent platform', version: '1.0.0' }, { capabilities: { tools: {}, resources: {} }, instructions: INSTRUCTIONS, jsonSchemaValidator });
    server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: tools.tools }));
    server.setRequestHandler(CallToolRequestSchema, async (req) => tools.call(caller, req.params.name, req.params.arguments ?? {}));
    server.setRequestHandler(ListResourcesRequestSchema, async () => ({ resources: await contractResources.list(app) }));
    server.setRequestHandler(ReadResourceRequestSchema, async (req) => contractResources.read(app, req.params.uri));
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    reply.raw.setHeader('x-request-id', request.id);
    reply.hijack();
    try {
      await server.connect(transport);
      await transport.handleRequest(request.raw as IncomingMessage, reply.raw, request.body);
    } catch (error) {
      request.log.error({ err: error }, 'mcp request failed');
      if (!reply.raw.headersSent) reply.raw.writeHead(500, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32603, message: 'Internal error' }, id: null }));
    } finally {
      await transport.close().catch(() => undefined);
      await server.close().catch(() => undefined);
    }
  };

  // Stateless: no server-initiated stream (GET) and no session to end (DELETE);
  // both still authenticate first so a client learns where to get a token.
  const notAllowed = async (request: FastifyRequest, reply: FastifyReply) => {
    await authenticate(request);
    return reply
      .code(405)
      .header('allow', 'POST')
      .send({ code: 'method_not_allowed', message: 'This MCP endpoint is stateless: send JSON-RPC messages with POST.', next_action: 'fix_request' });
  };

  const hidden = { schema: { hide: true } };
  app.post('/mcp', hidden, serve);
  app.get('/mcp', hidden, notAllowed);
  app.delete('/mcp', hidden, notAllowed);
};

export default mcpRoutes;
