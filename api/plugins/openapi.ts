// The OpenAPI 3.1 document is generated from the route schemas (zod through
// fastify-type-provider-zod and @fastify/swagger); no path is written by hand.
// One document covers all three surfaces; tags (grouped by x-tagGroups)
// separate them. finishDocument() applies the rules that hold for a whole
// surface, so routes need not repeat them.
import { STATUS_CODES } from 'node:http';
import swagger from '@fastify/swagger';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { jsonSchemaTransform, jsonSchemaTransformObject } from 'fastify-type-provider-zod';
import { surfaceOf, type Surface } from '../errors.ts';

export type CatalogRoute = { method: string; url: string; hidden: boolean };

declare module 'fastify' {
  interface FastifyInstance {
    /** Every route as registered (HEAD included), so tests can walk app and document. */
    routeCatalog: readonly CatalogRoute[];
  }
}

const DESCRIPTION = [
  'One document for the whole service, with three surfaces told apart by tags:',
  '',
  '- **Agent API** (`/api/agent/v1`, tag `agent`): bearer tokens for the resource `{base_url}/api/agent` (security scheme `AgentBearer`, scopes per operation); errors are `AgentApiError`, the shared admission limit answers `SharedRateLimitError`. Mutations require an `Idempotency-Key` header.',
  '- **Identity provider** (tag `identity`, served at `{auth_url}`): agent registration, claim and the JWT-bearer token exchange; errors are `{code, message, retry_after?}`.',
  '- **Platform API** (`/api/...`, all other tags): users, dashboards, runners and integrations (`PlatformJWT`, `DashboardJWT`, `RunnerToken`); errors are `{error, status, message?, details?}`. Tenant-scoped operations also take `x-tenant-id`.',
  '',
  'The agent registration guide is at `/auth.md`. The remote MCP endpoint `/mcp` (JSON-RPC over Streamable HTTP, tokens for the resource `{base_url}/mcp`) offers the Agent API operations as tools; MCP describes it, not this document. `/docs/llms.txt` indexes every published contract.',
].join('\n');

const SURFACE_GROUPS: Record<Surface, string> = {
  agent: 'Agent API',
  identity: 'Identity provider',
  platform: 'Platform API',
};
const SURFACE_ERRORS: Record<Surface, string> = {
  agent: 'AgentApiError',
  identity: 'IdentityError',
  platform: 'PlatformError',
};
// A tag without a description here draws a redocly warning: add new tags.
const TAG_DESCRIPTIONS: Record<string, string> = {
  agent: 'Agent API: identity, capabilities, company views, boards and managed-agent restore',
  identity: 'Identity provider: agent registration, claim, token exchange and authorization metadata',
  auth: 'Accounts: login, token renewal, profile and account deletion',
  dashboard: 'Dashboard login with a license key and TOTP two-factor authentication',
  tenants: 'Tenants (workspaces), their secrets, sessions and jobs',
  teams: "A workspace's people: members and their roles, invitations, and the audit of both",
  companies: 'Companies, their agents, tasks and runs',
  boards: 'Saved boards and the approvals of their public publication',
  'managed-agents': 'Managed agents of a tenant',
  runners: 'Self-hosted runners: enrolment, listing, revocation, heartbeat and work acknowledgement',
  chat: 'Chat sessions, messages and asynchronous chat jobs',
  jobs: 'Asynchronous jobs: status and cancellation',
  usage: 'Usage records, summaries and budgets',
  billing: 'Plan and usage limits',
  'provider-keys': 'Model-provider keys (masked except on resolve)',
  onboarding: 'First-run setup',
  contact: 'Contact form and its submissions',
  operations: 'Liveness and readiness',
};
const METHODS = new Set(['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace']);
const REF = '#/components/schemas/';

type Json = Record<string, unknown>;
type Operation = Json & { tags?: string[]; parameters?: Json[]; responses: Record<string, Json>; servers?: unknown };
type Document = Json & {
  paths: Record<string, Record<string, Operation>>;
  components: Json & { schemas: Record<string, Json> };
};

/** Visits every object in a JSON tree. */
function walk(node: unknown, visit: (o: Json) => void): void {
  if (Array.isArray(node)) for (const item of node) walk(item, visit);
  else if (node && typeof node === 'object') {
    visit(node as Json);
    for (const value of Object.values(node)) walk(value, visit);
  }
}

/** Component names reachable from everything outside components.schemas. */
function reachableSchemas(doc: Document): Set<string> {
  const seen = new Set<string>();
  const queue: string[] = [];
  const collect = (o: Json) => {
    if (typeof o.$ref === 'string' && o.$ref.startsWith(REF)) {
      const name = o.$ref.slice(REF.length);
      if (!seen.has(name)) {
        seen.add(name);
        queue.push(name);
      }
    }
  };
  walk({ ...doc, components: { ...doc.components, schemas: {} } }, collect);
  while (queue.length > 0) walk(doc.components.schemas[queue.shift() as string], collect);
  return seen;
}

/**
 * The type provider emits every named schema twice, `XInput` for requests and
 * `X` for responses. Keep one `X` where both are the same (or only the input
 * is used, so request schemas keep their spec names such as
 * publishInsightBoard.request.v1) and drop components nothing refers to.
 */
function mergeInputSchemas(doc: Document): void {
  const schemas = doc.components.schemas;
  const rename = new Map<string, string>();
  const canonical = (json: unknown) =>
    JSON.stringify(json, (key, value) =>
      key === '$ref' && typeof value === 'string' && value.startsWith(REF)
        ? REF + (rename.get(value.slice(REF.length)) ?? value.slice(REF.length))
        : value,
    );
  const pairs = Object.keys(schemas)
    .filter((name) => name.endsWith('Input') && schemas[name.slice(0, -'Input'.length)])
    .map((input) => [input, input.slice(0, -'Input'.length)] as const);
  // Nested schemas become equal once their own parts are merged: repeat to a fixpoint.
  for (let changed = true; changed; ) {
    changed = false;
    for (const [input, output] of pairs) {
      if (!rename.has(input) && canonical(schemas[input]) === canonical(schemas[output])) {
        rename.set(input, output);
        changed = true;
      }
    }
  }
  const applyRenames = () => {
    walk(doc, (o) => {
      if (typeof o.$ref === 'string' && o.$ref.startsWith(REF)) {
        const target = rename.get(o.$ref.slice(REF.length));
        if (target) o.$ref = REF + target;
      }
    });
    for (const from of rename.keys()) delete schemas[from];
  };
  applyRenames();
  const used = reachableSchemas(doc);
  rename.clear();
  for (const [input, output] of pairs) {
    if (schemas[input] && used.has(input) && !used.has(output)) {
      schemas[output] = schemas[input];
      rename.set(input, output);
    }
  }
  applyRenames();
  const reachable = reachableSchemas(doc);
  for (const name of Object.keys(schemas)) if (!reachable.has(name)) delete schemas[name];
}

/** `anyOf: [{}, …]` accepts anything: say so directly (zod renders unknown().nullable() that way). */
function simplifyAnyOf(doc: Document): void {
  walk(doc, (o) => {
    if (Array.isArray(o.anyOf) && o.anyOf.some((s) => s && typeof s === 'object' && Object.keys(s).length === 0))
      delete o.anyOf;
  });
}

function finishOperation(op: Operation, surface: Surface, authUrl: string | null): void {
  if (surface === 'identity' && authUrl) op.servers = [{ url: authUrl }];
  for (const [status, response] of Object.entries(op.responses)) {
    if (response.description === 'Default Response') response.description = STATUS_CODES[Number(status)] ?? 'Response';
    if (status === '429') {
      const retryAfter = { description: 'Seconds to wait before retrying', schema: { type: 'integer', minimum: 0 } };
      response.headers = { ...(response.headers as Json | undefined), 'Retry-After': retryAfter };
    }
  }
  // Any other failure (413, 415, 500, ...) leaves in the surface's error shape.
  // The Agent API lists exactly the statuses of the spec's table instead.
  if (surface !== 'agent' && !op.responses.default) {
    const content = (op.responses['400']?.content as Json | undefined) ?? {
      'application/json': { schema: { $ref: REF + SURFACE_ERRORS[surface] } },
    };
    op.responses.default = { description: 'Any other error, in the error shape of this surface', content };
  }
}

function finishDocument(doc: Document, authUrl: string | null): Document {
  const groups = new Map(Object.values(SURFACE_GROUPS).map((group) => [group, new Set<string>()]));
  for (const [path, item] of Object.entries(doc.paths)) {
    const surface = surfaceOf(path);
    for (const [method, op] of Object.entries(item)) {
      if (!METHODS.has(method)) continue;
      finishOperation(op, surface, authUrl);
      for (const tag of op.tags ?? []) {
        // A tag lives in one group: the surface of its first operation.
        if ([...groups.values()].some((tags) => tags.has(tag))) continue;
        groups.get(SURFACE_GROUPS[surface])?.add(tag);
      }
    }
  }
  simplifyAnyOf(doc);
  mergeInputSchemas(doc);
  doc.tags = [...groups.values()]
    .flatMap((tags) => [...tags].sort())
    .map((name) => (TAG_DESCRIPTIONS[name] ? { name, description: TAG_DESCRIPTIONS[name] } : { name }));
  doc['x-tagGroups'] = [...groups]
    .filter(([, tags]) => tags.size > 0)
    .map(([name, tags]) => ({ name, tags: [...tags].sort() }));
  return doc;
}

async function openapi(app: FastifyInstance) {
  const catalog: CatalogRoute[] = [];
  app.decorate('routeCatalog', catalog);
  app.addHook('onRoute', (route) => {
    for (const method of [route.method].flat()) {
      catalog.push({ method, url: route.url, hidden: Boolean((route.schema as { hide?: boolean } | undefined)?.hide) });
    }
  });

  const { baseUrl, authUrl } = app.config;
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.2',
      info: { title: 'Agent platform API', version: '1.0.0', description: DESCRIPTION },
      servers: [{ url: baseUrl }],
      components: {
        securitySchemes: {
          PlatformJWT: {
            type: 'http',
            scheme: 'bearer',
            bearerFormat: 'JWT',
            description: 'Platform token from POST /api/auth/login (15 minutes; renew with POST /api/auth/refresh)',
          },
          AgentBearer: {
            type: 'http',
            scheme: 'bearer',
            bearerFormat: 'JWT',
            description:
              'Access token from POST {auth_url}/oauth2/token (JWT-bearer grant, resource {base_url}/api/agent), about 5 minutes; auth class agent_bearer',
          },
          RunnerToken: {
            type: 'http',
            scheme: 'bearer',
            description: 'Runner token from POST /api/runners/enroll (shown once)',
          },
          DashboardJWT: {
            type: 'http',
            scheme: 'bearer',
            bearerFormat: 'JWT',
            description: 'Dashboard token from POST /api/dashboard/auth/login or /totp-login',
          },
          StripeSignature: {
            type: 'apiKey',
            in: 'header',
            name: 'Stripe-Signature',
            description:
              "Stripe's signature over the exact request body, checked with the webhook signing secret (STRIPE_WEBHOOK_SECRET)",
          },
          PurchaseWebhookBearer: {
            type: 'http',
            scheme: 'bearer',
            description: 'The shared secret configured at the in-app purchase provider (PURCHASE_WEBHOOK_SECRET)',
          },
        },
      },
    },
    transform: jsonSchemaTransform,
    transformObject: (input) =>
      finishDocument(jsonSchemaTransformObject(input) as Document, authUrl === baseUrl ? null : authUrl),
  });
}

export default fp(openapi, { name: 'openapi', dependencies: ['context'] });
