// One JSON-RPC request to the remote MCP endpoint, as an MCP client sends it
// over Streamable HTTP (injected: no socket).
import type { FastifyInstance } from 'fastify';

export const MCP_PROTOCOL_VERSION = '2025-11-25';

export function injectMcp(app: FastifyInstance, token: string, method: string, params: object) {
  return app.inject({
    method: 'POST',
    url: '/mcp',
    headers: {
      authorization: `Bearer ${token}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': MCP_PROTOCOL_VERSION,
    },
    payload: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
}
