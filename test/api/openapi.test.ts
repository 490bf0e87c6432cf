// The published OpenAPI document: one document in JSON and YAML, clean under
// `redocly lint`, in step with the app's routes both ways, and carrying the
// Agent API contract of the spec (operationIds, scopes, bounds, schema names).
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import { buildTestApp } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { sourceRoot } from '../helpers/paths.ts';

/**
 * Routes deliberately left out of the document (`schema: { hide: true }`),
 * each with its reason. The hidden routes of the app must be exactly these:
 * a new hidden route has to be named here. HEAD routes Fastify adds for
 * every GET are left out without being listed.
 */
const HIDDEN_ROUTES: Record<string, string> = {
  'GET /metrics':
    'without METRICS_TOKEN: a 404 saying how to turn metrics on (with it, Prometheus text behind a Bearer token)',
  'GET /openapi.json': 'the document itself',
  'GET /openapi.yaml': 'the document itself',
  'GET /auth.md': 'the registration guide, a Markdown document',
  'GET /api/ws': 'a websocket upgrade, which OpenAPI cannot describe',
  'GET /agent/identity/claim/verify': 'HTML page a person opens during a claim',
  'GET /agent/identity/claim/verify/:attemptId': 'HTML page a person opens during a claim',
  'POST /agent/identity/claim/verify/:attemptId': 'HTML form post of the claim page',
  'GET /invitations/accept': 'HTML page an invitation link opens (the token is in the fragment, never sent)',
  'POST /invitations/accept': 'HTML form post of the invitation page',
  'GET /invitations/accept.js': "the invitation page's script (moves the fragment's token into its form)",
  'GET /boards/public/:secret': 'hosted board page for people; the link secret is in the path',
  'GET /boards/approvals/:approvalId':
    'HTML page a tenant Admin opens from approve_url to approve or deny a public publish',
  'POST /boards/approvals/:approvalId': 'HTML form post of the approval page',
  'GET /arazzo.yaml': 'contract document (Arazzo workflow), linted on its own',
  'GET /docs/llms.txt': 'contract document (index for LLM agents), not an API operation',
  'GET /agent-public-contracts/v1/knowledge-manifest.json': 'contract document (manifest of the published documents)',
  'POST /mcp': 'MCP Streamable HTTP endpoint (JSON-RPC), described by its own tools/list',
  'GET /mcp': 'MCP Streamable HTTP endpoint (JSON-RPC), described by its own tools/list',
  'DELETE /mcp': 'MCP Streamable HTTP endpoint (JSON-RPC), described by its own tools/list',
  'GET /billing/return': 'HTML page a person lands on after Stripe Checkout or the portal',
  'GET /billing/sandbox/checkout/:id': 'HTML page of the development billing sandbox (Stripe Checkout stand-in)',
  'POST /billing/sandbox/checkout/:id/pay': 'HTML form post of the billing sandbox',
  'POST /billing/sandbox/checkout/:id/cancel': 'HTML form post of the billing sandbox',
  'GET /billing/sandbox/portal/:id': 'HTML page of the development billing sandbox (customer portal stand-in)',
  'POST /billing/sandbox/portal/:id/subscriptions/:subId/cancel': 'HTML form post of the billing sandbox',
  'GET /api/agent/v1/companies/*': 'catch-all that answers over-long path parameters in the Agent API error shape',
  'GET /api/agent/v1/boards/*': 'catch-all that answers over-long path parameters in the Agent API error shape',
  'POST /api/agent/v1/boards/*': 'catch-all that answers over-long path parameters in the Agent API error shape',
  'PUT /api/agent/v1/boards/*': 'catch-all that answers over-long path parameters in the Agent API error shape',
  'GET /': 'landing page for people (HTML)',
  'GET /account': "a person's sign-in and account page (HTML)",
  'POST /account/sign-in': 'HTML form post of the account page',
  'POST /account/sign-out': 'HTML form post of the account page',
  'GET /docs': 'API reference UI (Swagger UI, HTML) over this document',
  'GET /docs/json': 'this document again, as the API reference UI loads it (@fastify/swagger-ui)',
  'GET /docs/yaml': 'this document again as YAML (@fastify/swagger-ui)',
  'GET /docs/static/*': 'scripts, styles and icons of the API reference UI (@fastify/swagger-ui)',
  'GET /docs/static/index.html': 'redirect to the API reference UI (@fastify/swagger-ui)',
  'GET /docs/static/swagger-initializer.js': 'start-up script of the API reference UI (@fastify/swagger-ui)',
  'GET /api/channels/slack/oauth/callback':
    'HTML page a person lands on after installing the Slack app (OAuth redirect)',
  'GET /console': 'operator console page (HTML, operators only)',
  'GET /console/jobs': 'operator console page (HTML, operators only)',
  'GET /console/jobs/:jobId': 'operator console page (HTML, operators only)',
  'GET /console/jobs/bulk': 'operator console page: what a bulk action would do (HTML, operators only)',
  'GET /console/workers': 'operator console page (HTML, operators only)',
  'GET /console/schedules': 'operator console page (HTML, operators only)',
  'GET /console/tenants': 'operator console page (HTML, operators only)',
  'GET /console/tenants/:tenantId': 'operator console page (HTML, operators only)',
  'GET /console/audit': 'operator console page (HTML, operators only)',
  'GET /console/console.js': "the operator console's script (live updates)",
  'GET /console/live': "the operator console's websocket (live updates), which OpenAPI cannot describe",
  'POST /console/sign-in': 'HTML form post of the operator console',
  'POST /console/sign-out': 'HTML form post of the operator console',
  'POST /console/jobs/bulk': 'HTML form post of the operator console (a bulk action, audited per job)',
  'POST /console/jobs/:jobId/retry': 'HTML form post of the operator console (an audited action)',
  'POST /console/jobs/:jobId/cancel': 'HTML form post of the operator console (an audited action)',
  'POST /console/tenants/:tenantId/suspend': 'HTML form post of the operator console (an audited action)',
  'POST /console/tenants/:tenantId/resume': 'HTML form post of the operator console (an audited action)',
};

/** The Agent API endpoint table of the spec: method, path, operationId ('-' where the spec names none), scope. */
const AGENT_API: [string, string, string, string | null][] = [
  ['get', '/api/agent/v1/me', '-', null],
  ['get', '/api/agent/v1/capabilities', '-', null],
  ['get', '/api/agent/v1/companies', 'listAgentCompanies', 'svc:companies:read'],
  ['get', '/api/agent/v1/companies/{companyRef}', 'getAgentCompany', 'svc:companies:read'],
  ['get', '/api/agent/v1/companies/{companyRef}/agents', 'listAgentCompanyAgents', 'svc:companies:read'],
  ['get', '/api/agent/v1/companies/{companyRef}/tasks', 'listAgentCompanyTasks', 'svc:companies:read'],
  ['get', '/api/agent/v1/companies/{companyRef}/tasks/{taskRef}', 'getAgentCompanyTask', 'svc:companies:read'],
  ['get', '/api/agent/v1/companies/{companyRef}/runs', 'listAgentCompanyRuns', 'svc:companies:read'],
  ['get', '/api/agent/v1/companies/{companyRef}/runs/{runRef}', 'getAgentCompanyRun', 'svc:companies:read'],
  ['get', '/api/agent/v1/boards', 'listInsightBoards', 'svc:boards:read'],
  ['get', '/api/agent/v1/boards/{boardId}', 'getInsightBoard', 'svc:boards:read'],
  ['get', '/api/agent/v1/boards/{boardId}/publication', 'getInsightBoardPublication', 'svc:boards:read'],
  ['post', '/api/agent/v1/boards/{boardId}/publish', 'publishInsightBoard', 'svc:boards:publish'],
  ['post', '/api/agent/v1/boards/{boardId}/unpublish', 'unpublishInsightBoard', 'svc:boards:publish'],
  ['post', '/api/agent/v1/boards/{boardId}/rotate-link', 'rotateInsightBoardLink', 'svc:boards:publish'],
  ['post', '/api/agent/v1/agents/{agentRef}/restore', 'restoreAgent', 'svc:agents:write'],
];

/** Schema names of the spec (Agent API resources, request bodies, error bodies). */
const SCHEMA_NAMES: Record<string, string> = {
  listAgentCompanies: 'AgentCompanyListResponse',
  getAgentCompany: 'AgentCompanyResponse',
  listAgentCompanyAgents: 'AgentCompanyAgentListResponse',
  listAgentCompanyTasks: 'AgentCompanyTaskListResponse',
  getAgentCompanyTask: 'AgentCompanyTaskResponse',
  listAgentCompanyRuns: 'AgentCompanyRunListResponse',
  getAgentCompanyRun: 'AgentCompanyRunResponse',
  listInsightBoards: 'listInsightBoards.response.v1',
  getInsightBoard: 'getInsightBoard.response.v1',
  getInsightBoardPublication: 'getInsightBoardPublication.response.v1',
  publishInsightBoard: 'publishInsightBoard.response.v1',
  unpublishInsightBoard: 'unpublishInsightBoard.response.v1',
  rotateInsightBoardLink: 'rotateInsightBoardLink.response.v1',
  restoreAgent: 'ManagedAgentResponse',
};
const REQUEST_NAMES = ['publishInsightBoard', 'unpublishInsightBoard', 'rotateInsightBoardLink'];

type Parameter = { name: string; in: string; required?: boolean; schema: Record<string, unknown> };
type Operation = {
  operationId?: string;
  summary?: string;
  tags?: string[];
  security?: Record<string, string[]>[];
  parameters?: Parameter[];
  requestBody?: { content: Record<string, { schema: { $ref?: string } }> };
  responses: Record<string, { content?: Record<string, { schema: { $ref?: string } }> }>;
};
type Document = {
  openapi: string;
  info: { version: string; description: string };
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, unknown> };
};

const root = sourceRoot;
const redocly = path.join(root, 'node_modules/.bin/redocly');
const run = promisify(execFile);
const scratch = mkdtempSync(path.join(process.env.TEST_SCRATCH_DIR ?? tmpdir(), 'openapi-'));
t.teardown(() => rmSync(scratch, { recursive: true, force: true }));

async function cli(args: string[]) {
  // redocly exits 1 when lint finds errors; the JSON report says which.
  return run(redocly, args, {
    cwd: root,
    env: { ...process.env, REDOCLY_TELEMETRY: 'off' },
    maxBuffer: 64 * 1024 * 1024,
  }).catch((error: { stdout: string; stderr: string; code: number }) => ({
    stdout: error.stdout,
    stderr: `exit ${error.code}: ${error.stderr}`,
  }));
}

const databaseUrl = await createTestDatabase(t);
// Real-looking origins, with the identity provider apart, as in production.
const { app } = await buildTestApp(t, databaseUrl, {
  BASE_URL: 'https://api.platform.test',
  AUTH_URL: 'https://id.platform.test',
});
const jsonResponse = await app.inject('/openapi.json');
const yamlResponse = await app.inject('/openapi.yaml');
const doc: Document = jsonResponse.json();
const operations = Object.entries(doc.paths).flatMap(([p, item]) =>
  Object.entries(item).map(([method, op]) => ({ path: p, method, op })),
);

t.test('JSON and YAML are the same OpenAPI 3.1.2 document, version 1.0.0', async (t) => {
  t.equal(jsonResponse.statusCode, 200);
  t.match(jsonResponse.headers['content-type'], /^application\/json/);
  t.equal(yamlResponse.statusCode, 200);
  t.match(yamlResponse.headers['content-type'], /^application\/yaml/);
  t.equal(doc.openapi, '3.1.2');
  t.equal(doc.info.version, '1.0.0');
  t.match(doc.info.description, /Agent API[\s\S]*Identity provider[\s\S]*Platform API/);
  // redocly reads the YAML and writes it back as JSON: no YAML parser of our own.
  writeFileSync(path.join(scratch, 'openapi.yaml'), yamlResponse.body);
  const bundled = await cli([
    'bundle',
    path.join(scratch, 'openapi.yaml'),
    '--ext',
    'json',
    '-o',
    path.join(scratch, 'from-yaml.json'),
  ]);
  t.same(JSON.parse(readFileSync(path.join(scratch, 'from-yaml.json'), 'utf8')), doc, bundled.stderr);
});

t.test('redocly lint finds no errors', async (t) => {
  const file = path.join(scratch, 'openapi.json');
  writeFileSync(file, jsonResponse.body);
  const result = await cli(['lint', file, '--config', path.join(root, 'redocly.yaml'), '--format', 'json']);
  const report = JSON.parse(result.stdout) as {
    totals: { errors: number };
    problems: { ruleId: string; severity: string; message: string }[];
  };
  const errors = report.problems.filter((p) => p.severity === 'error').map((p) => `${p.ruleId}: ${p.message}`);
  t.same(errors, []);
  t.equal(report.totals.errors, 0);
});

t.test('every documented operation is an app route, every app route is documented or listed', async (t) => {
  const routes = app.routeCatalog.map((r) => ({ ...r, key: `${r.method} ${r.url}` }));
  const gets = new Set(routes.filter((r) => r.method === 'GET').map((r) => r.url));
  const shown = new Set(routes.filter((r) => !r.hidden && !(r.method === 'HEAD' && gets.has(r.url))).map((r) => r.key));
  const hidden = routes.filter((r) => r.hidden && r.method !== 'HEAD').map((r) => r.key);
  const documented = new Set(
    operations.map(({ path: p, method }) => `${method.toUpperCase()} ${p.replace(/\{(\w+)\}/g, ':$1')}`),
  );

  t.same(
    [...documented].filter((key) => !shown.has(key)),
    [],
    'documented operations without a route',
  );
  t.same(
    [...shown].filter((key) => !documented.has(key)),
    [],
    'routes missing from the document',
  );
  t.same(hidden.sort(), Object.keys(HIDDEN_ROUTES).sort(), 'hidden routes are exactly the listed exceptions');
});

t.test('every operation has a unique operationId, a summary, tags and its security', async (t) => {
  const ids = operations.map(({ op }) => op.operationId);
  t.notOk(
    ids.some((id) => !id || !/^[a-z][A-Za-z0-9]*$/.test(id)),
    'camelCase operationIds everywhere',
  );
  t.equal(new Set(ids).size, ids.length, 'operationIds are unique');
  for (const { path: p, method, op } of operations) {
    t.ok(op.summary && op.tags?.length, `${method} ${p} has a summary and tags`);
    t.ok(Array.isArray(op.security), `${method} ${p} declares its security (empty when public)`);
  }
});

t.test(
  'the Agent API operations carry the spec operationIds, AgentBearer scopes, schema names and bounds',
  async (t) => {
    for (const [method, p, operationId, scope] of AGENT_API) {
      const op = doc.paths[p]?.[method];
      if (!op) {
        t.fail(`${method} ${p} is documented`);
        continue;
      }
      if (operationId !== '-') t.equal(op.operationId, operationId, `${method} ${p}`);
      t.same(op.security, [{ AgentBearer: scope ? [scope] : [] }], `${op.operationId} security`);
      const name = SCHEMA_NAMES[op.operationId ?? ''];
      if (name) {
        t.equal(
          op.responses['200']?.content?.['application/json']?.schema.$ref,
          `#/components/schemas/${name}`,
          `${op.operationId} 200`,
        );
        t.ok(doc.components.schemas[name], `${name} is a component`);
      }
      if (op.responses['429'])
        t.equal(
          op.responses['429'].content?.['application/json']?.schema.$ref,
          '#/components/schemas/SharedRateLimitError',
        );
      t.equal(
        op.responses['400']?.content?.['application/json']?.schema.$ref,
        method === 'get' && !op.parameters ? undefined : '#/components/schemas/AgentApiError',
      );
      if (REQUEST_NAMES.includes(op.operationId ?? '')) {
        t.equal(
          op.requestBody?.content['application/json']?.schema.$ref,
          `#/components/schemas/${op.operationId}.request.v1`,
        );
      }
      if (method === 'post') {
        const key = op.parameters?.find((x) => x.in === 'header' && x.name.toLowerCase() === 'idempotency-key');
        t.match(key, { required: true, schema: { minLength: 8, maxLength: 200 } }, `${op.operationId} Idempotency-Key`);
      }
    }

    const param = (p: string, method: string, name: string) =>
      doc.paths[p]?.[method]?.parameters?.find((x) => x.name === name)?.schema;
    t.match(param('/api/agent/v1/companies/{companyRef}', 'get', 'companyRef'), { minLength: 1, maxLength: 256 });
    t.match(param('/api/agent/v1/companies/{companyRef}/tasks/{taskRef}', 'get', 'taskRef'), {
      minLength: 1,
      maxLength: 2048,
    });
    t.match(param('/api/agent/v1/companies/{companyRef}/runs/{runRef}', 'get', 'runRef'), {
      minLength: 1,
      maxLength: 256,
    });
    t.match(param('/api/agent/v1/companies/{companyRef}/runs', 'get', 'taskId'), { minLength: 1, maxLength: 256 });
    t.match(param('/api/agent/v1/companies', 'get', 'limit'), { minimum: 1, maximum: 100 });
    t.match(param('/api/agent/v1/boards/{boardId}', 'get', 'boardId'), { minLength: 1, maxLength: 256 });
    t.match(param('/api/agent/v1/boards', 'get', 'limit'), { minimum: 1, maximum: 100, default: 50 });
    t.match(param('/api/agent/v1/boards', 'get', 'cursor'), { minimum: 0, maximum: 1_000_000, default: 0 });
    t.match(param('/api/agent/v1/boards', 'get', 'scopeType'), { enum: ['company', 'agent'] });
    t.match(param('/api/agent/v1/boards', 'get', 'scopeId'), { minLength: 1, maxLength: 128 });
    t.match(
      param('/api/chat/send', 'post', 'idempotency-key'),
      { minLength: 8, maxLength: 200 },
      'chat send declares Idempotency-Key',
    );
    // Every Agent API mutation, in the spec table or not, takes the key (rule 5).
    for (const { path: p, method, op } of operations.filter(
      (o) => o.path.startsWith('/api/agent/') && o.method !== 'get',
    )) {
      t.match(
        op.parameters?.find((x) => x.in === 'header' && x.name.toLowerCase() === 'idempotency-key'),
        { required: true },
        `${method} ${p}`,
      );
    }
  },
);

t.test('identity provider operations are served at {auth_url}', async (t) => {
  // The protected-resource metadata belongs to {base_url}, the resource server.
  const identity = operations.filter(
    ({ path: p, op }) => op.tags?.includes('identity') && !p.includes('/oauth-protected-resource/'),
  );
  t.ok(identity.length >= 6, 'the identity operations are found');
  for (const { path: p, method, op } of identity) {
    t.same((op as { servers?: unknown }).servers, [{ url: 'https://id.platform.test' }], `${method} ${p}`);
  }
});
