// The operations of the app's own /openapi.json, flattened for generated
// tests (fuzz, isolation): method, path, parameters and body schema with
// their $refs inlined, and the security schemes each one asks for.
import type { FastifyInstance } from 'fastify';

/**
 * Operations that ask an outside service, unreachable in tests by construction
 * (configured to a closed local port): their documented upstream refusal is
 * the expected answer to a valid request.
 */
export const UPSTREAM_ANSWERS: Record<string, { status: number; code: string }> = {
  setupOnboardingProvider: { status: 502, code: 'provider_unreachable' },
  syncInAppPurchases: { status: 502, code: 'purchase_provider_unavailable' },
  loginWithPartner: { status: 502, code: 'provider_unavailable' },
  loginWithPartnerIos: { status: 502, code: 'provider_unavailable' },
  loginWithPartnerToken: { status: 502, code: 'provider_unavailable' },
  startAltidpLogin: { status: 502, code: 'provider_unavailable' },
  loginWithAltidp: { status: 502, code: 'provider_unavailable' },
  receiveAltidpNotification: { status: 502, code: 'provider_unavailable' },
  startPartnerConnect: { status: 502, code: 'provider_unavailable' },
  startPartnerConnectRedirect: { status: 502, code: 'provider_unavailable' },
};

/** Environment that points those outside services at a closed local port. */
export const CLOSED_UPSTREAMS: Record<string, string> = {
  OPENAI_BASE_URL: 'http://127.0.0.1:9/v1',
  ANTHROPIC_BASE_URL: 'http://127.0.0.1:9/v1',
  OPENROUTER_BASE_URL: 'http://127.0.0.1:9/v1',
  OLLAMA_BASE_URL: 'http://127.0.0.1:9/v1',
  PURCHASE_API_BASE: 'http://127.0.0.1:9',
  PURCHASE_API_KEY: 'test-purchase-key',
  PARTNER_ISSUER: 'http://127.0.0.1:9',
  PARTNER_CLIENT_ID: 'fuzz-web',
  PARTNER_CLIENT_SECRET: 'fuzz-web-secret',
  PARTNER_IOS_CLIENT_ID: 'fuzz-ios',
  PARTNER_REDIRECT_URIS: 'https://app.example/callback',
  ALTIDP_ISSUER: 'http://127.0.0.1:9',
  ALTIDP_CLIENT_ID: 'fuzz-alt',
  ALTIDP_CLIENT_SECRET: 'fuzz-alt-secret',
};

export type JsonSchema = Record<string, unknown>;
export type Param = { name: string; in: 'path' | 'query' | 'header'; required: boolean; schema: JsonSchema };
export type Operation = {
  method: string;
  /** OpenAPI path, e.g. /api/companies/{companyId} */
  path: string;
  id: string;
  key: string;
  params: Param[];
  body: { contentType: string; schema: JsonSchema; required: boolean } | null;
  security: string[];
  /** The tenant role the route declares (`x-tenant-role`), if it is tenant-scoped. */
  tenantRole: 'admin' | 'member' | 'viewer' | null;
  /** The role an agent's claimer needs (`x-claimer-role`), on Agent API operations. */
  claimerRole: 'admin' | 'member' | 'viewer' | null;
};

type RawOperation = {
  operationId?: string;
  security?: Record<string, string[]>[];
  parameters?: Array<{ name: string; in: string; required?: boolean; schema?: JsonSchema }>;
  requestBody?: { required?: boolean; content: Record<string, { schema?: JsonSchema }> };
  'x-tenant-role'?: 'admin' | 'member' | 'viewer';
  'x-claimer-role'?: 'admin' | 'member' | 'viewer';
};
type Document = {
  paths: Record<string, Record<string, RawOperation>>;
  components?: { schemas?: Record<string, JsonSchema> };
  security?: Record<string, string[]>[];
};

/** Inlines local $refs (recursive schemas are cut at `depth` levels into `{}`). */
export function deref(schema: unknown, doc: Document, depth = 0): unknown {
  if (Array.isArray(schema)) return schema.map((s) => deref(s, doc, depth));
  if (!schema || typeof schema !== 'object') return schema;
  const node = schema as JsonSchema;
  if (typeof node.$ref === 'string') {
    if (depth > 6) return {};
    const name = node.$ref.replace('#/components/schemas/', '');
    const { $ref: _ref, ...rest } = node;
    return deref({ ...(doc.components?.schemas?.[name] ?? {}), ...rest }, doc, depth + 1);
  }
  return Object.fromEntries(Object.entries(node).map(([k, v]) => [k, deref(v, doc, depth)]));
}

export async function loadOperations(app: FastifyInstance): Promise<Operation[]> {
  const res = await app.inject({ method: 'GET', url: '/openapi.json' });
  if (res.statusCode !== 200) throw new Error(`GET /openapi.json: ${res.statusCode}`);
  const doc = res.json() as Document;
  const operations: Operation[] = [];
  for (const [path, methods] of Object.entries(doc.paths)) {
    for (const [method, raw] of Object.entries(methods)) {
      if (!['get', 'post', 'put', 'patch', 'delete'].includes(method)) continue;
      const content = raw.requestBody?.content ?? {};
      const [contentType, media] = Object.entries(content)[0] ?? [];
      operations.push({
        method: method.toUpperCase(),
        path,
        id: raw.operationId ?? `${method} ${path}`,
        key: `${method.toUpperCase()} ${path}`,
        params: (raw.parameters ?? [])
          .filter((p) => p.in === 'path' || p.in === 'query' || p.in === 'header')
          .map((p) => ({
            name: p.name,
            in: p.in as Param['in'],
            required: Boolean(p.required),
            schema: deref(p.schema ?? {}, doc) as JsonSchema,
          })),
        body: contentType
          ? {
              contentType,
              schema: deref(media?.schema ?? {}, doc) as JsonSchema,
              required: Boolean(raw.requestBody?.required),
            }
          : null,
        security: (raw.security ?? doc.security ?? []).flatMap((s) => Object.keys(s)),
        tenantRole: raw['x-tenant-role'] ?? null,
        claimerRole: raw['x-claimer-role'] ?? null,
      });
    }
  }
  return operations;
}

/** The concrete URL of an operation for the given path and query values (path values already encoded or not). */
export function urlOf(
  op: Operation,
  pathValues: Record<string, string>,
  query: Record<string, string> = {},
  encode = true,
): string {
  const path = op.path.replace(/\{([^}]+)\}/g, (_, name: string) => {
    const value = pathValues[name] ?? 'x';
    return encode ? encodeURIComponent(value) : value;
  });
  const qs = new URLSearchParams(query).toString();
  return qs ? `${path}?${qs}` : path;
}
