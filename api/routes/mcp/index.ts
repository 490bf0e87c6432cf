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
import type { FastifyError, FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { AgentHttpError } from '../../errors.ts';
import type { AuthenticatedAgent } from '../../plugins/agent-auth.ts';
import type { Caller } from '../agent/operation.ts';
import { contractResources } from './resources.ts';
import { agentTools } from './tools.ts';
import { mcpSdk } from './sdk.ts';

const INSTRUCTIONS =
  'Tools mirror the Agent API (/api/agent/v1): same scopes, refusal codes and next actions. Call getAgentCapabilities first and follow its next_actions. ' +
  'Mutating tools need an idempotency_key (8-200 characters) unique to the exact call; repeat it only to retry that call. ' +
  'A refusal is a tool error whose text is JSON {code, message, next_action}. URLs meant for a person (approve_url, claim pages) go to the user; never attach a token to them. ' +
  'Contract documents (OpenAPI, Arazzo, auth.md, llms.txt, knowledge manifest) are resources.';

type Message = { jsonrpc?: unknown; id?: unknown; method?: unknown; params?: { name?: unknown; arguments?: unknown } };
const asMessage = (body: unknown): Message | null =>
  body && typeof body === 'object' && !Array.isArray(body) ? (body as Message) : null;
const rpcError = (id: unknown, code: number, message: string) => ({
  jsonrpc: '2.0',
  id: id ?? null,
  error: { code, message },
});

declare module 'fastify' {
  interface FastifyRequest {
    mcpCaller: AuthenticatedAgent | null;
  }
}

const mcpRoutes: FastifyPluginAsync = async (app) => {
  const tools = agentTools(app);
  const allowedOrigin = new URL(app.config.baseUrl).origin;
  app.decorateRequest('mcpCaller', null);

  // Before the body is read: a browser page of another origin is refused
  // (DNS rebinding), then the token is checked, so a client without one gets
  // the 401 that starts discovery whatever it sent.
  const authenticate = async (request: FastifyRequest) => {
    const origin = request.headers.origin;
    if (origin !== undefined && origin !== allowedOrigin) {
      throw new AgentHttpError(
        403,
        'origin_not_allowed',
        `Requests from the origin ${origin} are not accepted; call /mcp from a server-side client.`,
        'fix_request',
      );
    }
    request.mcpCaller = await app.mcpAuth.authenticate(request.headers.authorization);
  };

  // A body that is not JSON is a JSON-RPC parse error; other refusals keep the agent shape.
  const errorHandler = (error: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
    if (error.code === 'FST_ERR_CTP_INVALID_JSON_BODY' || error.code === 'FST_ERR_CTP_EMPTY_JSON_BODY') {
      return reply.code(400).send(rpcError(null, -32700, 'Parse error: the body is not a JSON-RPC message.'));
    }
    return app.errorHandler(error, request, reply);
  };

  const serve = async (request: FastifyRequest, reply: FastifyReply) => {
    const { agent, context } = request.mcpCaller!;
    const message = asMessage(request.body);
    // JSON-RPC batches left MCP in 2025-06-18: one message per POST, so each
    // tool call is admitted, scope-checked and counted on its own.
    if (!message)
      return reply
        .code(400)
        .send(rpcError(null, -32600, 'Send one JSON-RPC message per request; batches are not supported.'));
    if (message.method === 'tools/call') {
      const scope = typeof message.params?.name === 'string' ? tools.scopeOf(message.params.name) : undefined;
      if (scope && !agent.scopes.includes(scope)) throw app.mcpAuth.scopeDenied(scope, agent.claimState);
      const args = message.params?.arguments;
      if (args !== undefined && (args === null || typeof args !== 'object' || Array.isArray(args))) {
        return reply.send(
          rpcError(message.id, -32602, 'Invalid params: arguments must be an object of named arguments.'),
        );
      }
    }
    const caller: Caller = { agent, context, log: request.log.child({ principalId: agent.principalId }) };
    const { Server, StreamableHTTPServerTransport, jsonSchemaValidator, types } = await mcpSdk();
    const server = new Server(
      { name: 'agent-platform', title: 'Agent platform', version: '1.0.0' },
      { capabilities: { tools: {}, resources: {} }, instructions: INSTRUCTIONS, jsonSchemaValidator },
    );
    server.setRequestHandler(types.ListToolsRequestSchema, async () => ({ tools: tools.tools }));
    server.setRequestHandler(types.CallToolRequestSchema, async (req) =>
      tools.call(caller, req.params.name, req.params.arguments ?? {}),
    );
    server.setRequestHandler(types.ListResourcesRequestSchema, async () => ({
      resources: await contractResources.list(app),
    }));
    server.setRequestHandler(types.ReadResourceRequestSchema, async (req) =>
      contractResources.read(app, req.params.uri),
    );
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    reply.raw.setHeader('x-request-id', request.id);
    reply.hijack();
    try {
      await server.connect(transport);
      await transport.handleRequest(request.raw as IncomingMessage, reply.raw, request.body);
    } catch (error) {
      request.log.error({ err: error }, 'mcp request failed');
      if (!reply.raw.headersSent)
        reply.raw
          .writeHead(500, { 'content-type': 'application/json' })
          .end(JSON.stringify(rpcError(message.id, -32603, 'Internal error')));
    } finally {
      await transport.close().catch(() => undefined);
      await server.close().catch(() => undefined);
    }
  };

  // Stateless: no server-initiated stream (GET) and no session to end (DELETE);
  // both still authenticate first so a client learns where to get a token.
  const notAllowed = async (_request: FastifyRequest, reply: FastifyReply) =>
    reply.code(405).header('allow', 'POST').send({
      code: 'method_not_allowed',
      message: 'This MCP endpoint is stateless: send JSON-RPC messages with POST.',
      next_action: 'fix_request',
    });

  const options = { onRequest: authenticate, errorHandler, schema: { hide: true } };
  app.post('/mcp', options, serve);
  app.get('/mcp', options, notAllowed);
  app.delete('/mcp', options, notAllowed);
};

export default mcpRoutes;
