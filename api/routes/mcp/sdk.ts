// The MCP SDK, loaded on the first /mcp request: importing it (with its
// express and Ajv dependencies) costs about half a second of CPU, which every
// api process and test file that never serves MCP would otherwise pay.
import type { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';

const load = async () => {
  const [server, http, ajv, types] = await Promise.all([
    import('@modelcontextprotocol/sdk/server/index.js'),
    import('@modelcontextprotocol/sdk/server/streamableHttp.js'),
    import('@modelcontextprotocol/sdk/validation/ajv'),
    import('@modelcontextprotocol/sdk/types.js'),
  ]);
  // Shared: the SDK's default builds a new Ajv for every Server, which halves
  // the requests per second of this per-request-server endpoint (measured).
  const jsonSchemaValidator: AjvJsonSchemaValidator = new ajv.AjvJsonSchemaValidator();
  return {
    Server: server.Server,
    StreamableHTTPServerTransport: http.StreamableHTTPServerTransport,
    jsonSchemaValidator,
    types,
  };
};

let sdk: ReturnType<typeof load> | null = null;
export const mcpSdk = () => (sdk ??= load());
