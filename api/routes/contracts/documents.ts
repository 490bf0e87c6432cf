// The public contract documents as the exact bytes the server sends, rendered
// once per app: the routes here serve these buffers, the knowledge manifest
// hashes them, and the MCP endpoint can expose them as resources. Documents
// that other routes serve (OpenAPI, auth.md, RFC 9728 metadata) are read
// through app.inject, so their hashes are of what a client really receives.
import { createHash } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import type { Config } from '../../../core/config.ts';
import { protectedResourceMetadataUrl } from '../identity/metadata.ts';
import { arazzoQuickstart, CONTRACT_VERSION } from './arazzo.ts';
import { llmsTxt, MANIFEST_PATH } from './llms.ts';

export type ContractDocument = {
  id: string;
  /** Absolute URL ({base_url} + path). */
  url: string;
  path: string;
  /** The Content-Type header sent with the document. */
  mediaType: string;
  /** What the document is, e.g. openapi-3.1, arazzo-1.0.1, rfc9728. */
  format: string;
  version: string;
  body: Buffer;
  /** Lowercase hex SHA-256 of body. */
  sha256: string;
};

export const sha256Hex = (body: Buffer) => createHash('sha256').update(body).digest('hex');

function document(config: Config, fields: Omit<ContractDocument, 'url' | 'sha256'>): ContractDocument {
  return { ...fields, url: `${config.baseUrl}${fields.path}`, sha256: sha256Hex(fields.body) };
}

// Keyed by the config object: one per app, shared by all its plugin contexts.
const own = new WeakMap<Config, { arazzo: ContractDocument; llms: ContractDocument }>();

/** The documents this module renders itself (they depend on the config only). */
export function ownDocuments(config: Config) {
  let docs = own.get(config);
  if (!docs) {
    docs = {
      arazzo: document(config, {
        id: 'arazzo',
        path: '/arazzo.yaml',
        mediaType: 'application/yaml; charset=utf-8',
        format: 'arazzo-1.0.1',
        version: CONTRACT_VERSION,
        body: Buffer.from(arazzoQuickstart(config.baseUrl)),
      }),
      // text/plain: the file is named .txt and llms.txt files are served as
      // plain text almost everywhere; its markdown is a convention, not a type.
      llms: document(config, {
        id: 'llms-txt',
        path: '/docs/llms.txt',
        mediaType: 'text/plain; charset=utf-8',
        format: 'llms.txt',
        version: CONTRACT_VERSION,
        body: Buffer.from(llmsTxt(config.baseUrl, config.authUrl)),
      }),
    };
    own.set(config, docs);
  }
  return docs;
}

// Served by other routes; read back through the app.
const SERVED_ELSEWHERE = [
  { id: 'openapi-json', path: '/openapi.json', format: 'openapi-3.1' },
  { id: 'openapi-yaml', path: '/openapi.yaml', format: 'openapi-3.1' },
  { id: 'auth-md', path: '/auth.md', format: 'markdown' },
  { id: 'protected-resource-agent-api', path: '/.well-known/oauth-protected-resource/api/agent', format: 'rfc9728' },
  { id: 'protected-resource-mcp', path: '/.well-known/oauth-protected-resource/mcp', format: 'rfc9728' },
] as const;

async function readServed(app: FastifyInstance): Promise<ContractDocument[]> {
  const docs: ContractDocument[] = [];
  let openapiVersion = CONTRACT_VERSION;
  for (const { id, path, format } of SERVED_ELSEWHERE) {
    const res = await app.inject({ method: 'GET', url: path });
    if (res.statusCode !== 200)
      throw new Error(`GET ${path} answered ${res.statusCode}; cannot describe it in the manifest`);
    const body = res.rawPayload;
    if (id === 'openapi-json')
      openapiVersion = String(
        (JSON.parse(body.toString('utf8')) as { info?: { version?: unknown } }).info?.version ?? CONTRACT_VERSION,
      );
    const version = format === 'openapi-3.1' ? openapiVersion : CONTRACT_VERSION;
    docs.push(
      document(app.config, { id, path, format, version, mediaType: String(res.headers['content-type']), body }),
    );
  }
  return docs;
}

const all = new WeakMap<Config, Promise<ContractDocument[]>>();

/**
 * Every public contract document (not the manifest itself), in a fixed order.
 * Call it while serving a request, not while plugins register: it reads the
 * other documents with app.inject, which needs a ready app. Cached per app.
 */
export function contractDocuments(app: FastifyInstance): Promise<ContractDocument[]> {
  let docs = all.get(app.config);
  if (!docs) {
    const { arazzo, llms } = ownDocuments(app.config);
    docs = readServed(app).then(([json, yaml, ...rest]) => [json!, yaml!, arazzo, llms, ...rest]);
    all.set(app.config, docs);
    // A failed read (app closing, say) is retried by the next caller.
    docs.catch(() => all.delete(app.config));
  }
  return docs;
}

const manifests = new WeakMap<Config, Promise<ContractDocument>>();

/**
 * The knowledge manifest as served. No generated_at: the bytes depend only
 * on the documents, so the ETag is stable across restarts and replicas.
 */
export function knowledgeManifest(app: FastifyInstance): Promise<ContractDocument> {
  let manifest = manifests.get(app.config);
  if (!manifest) {
    const { baseUrl, authUrl } = app.config;
    manifest = contractDocuments(app).then((docs) => {
      const content = {
        manifest_version: '1',
        service: { name: 'Agent platform', base_url: baseUrl, auth_url: authUrl },
        agent_api: {
          base_path: '/api/agent/v1',
          version: '1.0.0',
          launch_state: 'Live',
          contract_status: 'implemented',
        },
        mcp: {
          url: `${baseUrl}/mcp`,
          transport: 'streamable-http',
          resource: `${baseUrl}/mcp`,
          resource_metadata: protectedResourceMetadataUrl(baseUrl, 'mcp'),
        },
        documents: docs.map((d) => ({
          id: d.id,
          url: d.url,
          media_type: d.mediaType,
          format: d.format,
          version: d.version,
          sha256: d.sha256,
          bytes: d.body.length,
        })),
      };
      return document(app.config, {
        id: 'knowledge-manifest',
        path: MANIFEST_PATH,
        mediaType: 'application/json; charset=utf-8',
        format: 'knowledge-manifest',
        version: '1',
        body: Buffer.from(`${JSON.stringify(content, null, 2)}\n`),
      });
    });
    manifests.set(app.config, manifest);
    manifest.catch(() => manifests.delete(app.config));
  }
  return manifest;
}
