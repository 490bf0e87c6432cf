// The public contract documents as read-only MCP resources, addressed by
// their public URLs and read from the same bytes the HTTP routes serve (and
// the knowledge manifest hashes).
import type { FastifyInstance } from 'fastify';
import type { ReadResourceResult, Resource } from '@modelcontextprotocol/sdk/types.js';
import { mcpSdk } from './sdk.ts';

const RESOURCE_NOT_FOUND = -32002;
import { contractDocuments, knowledgeManifest, type ContractDocument } from '../contracts/documents.ts';

const TITLES: Record<string, string> = {
  'openapi-json': 'OpenAPI description (JSON)',
  'openapi-yaml': 'OpenAPI description (YAML)',
  arazzo: 'Arazzo quickstart workflow',
  'llms-txt': 'llms.txt index',
  'auth-md': 'Agent registration and token guide',
  'protected-resource-agent-api': 'Protected-resource metadata of the Agent API',
  'protected-resource-mcp': 'Protected-resource metadata of this MCP endpoint',
};

const all = async (app: FastifyInstance): Promise<ContractDocument[]> => [
  ...(await contractDocuments(app)),
  await knowledgeManifest(app),
];
const mimeOf = (doc: ContractDocument) => doc.mediaType.split(';')[0]!.trim();

export const contractResources = {
  async list(app: FastifyInstance): Promise<Resource[]> {
    return (await all(app)).map((doc) => ({
      uri: doc.url,
      name: doc.id,
      title: TITLES[doc.id] ?? (doc.id === 'knowledge-manifest' ? 'Knowledge manifest' : doc.id),
      mimeType: mimeOf(doc),
      size: doc.body.length,
      annotations: { audience: ['assistant'], priority: doc.id === 'llms-txt' ? 1 : 0.5 },
    }));
  },

  async read(app: FastifyInstance, uri: string): Promise<ReadResourceResult> {
    const doc = (await all(app)).find((d) => d.url === uri);
    // -32002 is MCP's "resource not found".
    if (!doc)
      throw new (await mcpSdk()).types.McpError(RESOURCE_NOT_FOUND, `No resource ${uri}; list the resources.`, { uri });
    return { contents: [{ uri: doc.url, mimeType: mimeOf(doc), text: doc.body.toString('utf8') }] };
  },
};
