// The remote MCP endpoint driven by the official SDK client over real HTTP:
// it finds the authorization server from the 401, gets its own token with the
// JWT-bearer grant for resource {base_url}/mcp, lists tools and calls reads
// and mutations that run the same operations as the Agent API.
import { createHash } from 'node:crypto';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type {
  OAuthClientInformationMixed,
  OAuthClientMetadata,
  OAuthTokens,
} from '@modelcontextprotocol/sdk/shared/auth.js';
import t from 'tap';
import { sql } from '../../../../core/db/pool.ts';
import { startTestServerAtOwnUrl } from '../../../helpers/app.ts';
import { createTestDatabase } from '../../../helpers/db.ts';
import { createBoardScopes, markClaimed } from '../../../helpers/fixtures.ts';

const databaseUrl = await createTestDatabase(t);
const api = await startTestServerAtOwnUrl(t, databaseUrl);
const { db, url: base } = api;
const JWT_BEARER = 'urn:ietf:params:oauth:grant-type:jwt-bearer';
const MCP_HEADERS = {
  'content-type': 'application/json',
  accept: 'application/json, text/event-stream',
  'mcp-protocol-version': '2025-11-25',
};

async function registerAnonymously(claimed: boolean) {
  const res = await fetch(`${base}/agent/identity`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ type: 'anonymous' }),
  });
  const body = (await res.json()) as {
    registration: { id: string };
    identity: { assertion: string };
    workspace?: { id: string };
  };
  if (claimed) await markClaimed(db, body.registration.id);
  return body;
}
async function tokenFor(assertion: string, resource: string): Promise<string> {
  const res = await fetch(`${base}/oauth2/token`, {
    method: 'POST',
    body: new URLSearchParams({ grant_type: JWT_BEARER, assertion, resource }),
  });
  return ((await res.json()) as { access_token: string }).access_token;
}
/** A company and a company agent in the registration's workspace (board scopes). */
async function scopesOf(reg: { registration: { id: string } }) {
  const tenantId = String(
    await db.oneFirst(sql.unsafe`select tenant_id from agent_registrations where id = ${reg.registration.id}`),
  );
  return createBoardScopes(db, tenantId);
}
const rpc = (method: string, params: object = {}, id = 1) => JSON.stringify({ jsonrpc: '2.0', id, method, params });

/** A non-interactive OAuth client: the JWT-bearer grant with the agent's assertion, no redirect. */
class AssertionProvider implements OAuthClientProvider {
  saved: OAuthTokens | undefined;
  info: OAuthClientInformationMixed | undefined = { client_id: 'mcp-test-agent' };
  tokenRequests = 0;
  constructor(private assertion: string) {}
  get redirectUrl() {
    return undefined;
  }
  get clientMetadata(): OAuthClientMetadata {
    return {
      client_name: 'mcp test agent',
      redirect_uris: [],
      grant_types: [JWT_BEARER],
      token_endpoint_auth_method: 'none',
    };
  }
  clientInformation() {
    return this.info;
  }
  saveClientInformation(info: OAuthClientInformationMixed) {
    this.info = info;
  }
  tokens() {
    return this.saved;
  }
  saveTokens(tokens: OAuthTokens) {
    this.saved = tokens;
  }
  prepareTokenRequest() {
    this.tokenRequests++;
    return new URLSearchParams({ grant_type: JWT_BEARER, assertion: this.assertion });
  }
  redirectToAuthorization(): void {
    throw new Error('no interactive authorization in a JWT-bearer client');
  }
  saveCodeVerifier() {}
  codeVerifier(): string {
    throw new Error('no PKCE in a JWT-bearer client');
  }
}

/** fetch that records every request the SDK makes (URL, method, token audience). */
function recordingFetch(log: Array<{ method: string; url: string; status: number; body?: string }>): typeof fetch {
  return async (input, init) => {
    const url = String(input instanceof Request ? input.url : input);
    const res = await fetch(input, init);
    log.push({
      method: init?.method ?? 'GET',
      url,
      status: res.status,
      body:
        typeof init?.body === 'string'
          ? init.body
          : init?.body instanceof URLSearchParams
            ? init.body.toString()
            : undefined,
    });
    return res;
  };
}

async function connect(assertion: string) {
  const provider = new AssertionProvider(assertion);
  const requests: Array<{ method: string; url: string; status: number; body?: string }> = [];
  const transport = new StreamableHTTPClientTransport(new URL(`${base}/mcp`), {
    authProvider: provider,
    fetch: recordingFetch(requests),
  });
  const client = new Client({ name: 'mcp-test', version: '1.0.0' });
  await client.connect(transport);
  t.teardown(() => client.close());
  return { client, provider, requests };
}

const errorOf = (result: object) => {
  const content = (result as { content: Array<{ type: string; text: string }> }).content;
  return JSON.parse(content[0]!.text) as {
    code: string;
    message: string;
    next_action: string;
    details?: Array<{ path: string; message: string }>;
  };
};

t.test('the SDK client discovers the authorization server from the 401 and gets a /mcp token itself', async (t) => {
  const reg = await registerAnonymously(true);
  const { client, provider, requests } = await connect(reg.identity.assertion);
  t.equal(provider.tokenRequests, 1, 'one JWT-bearer exchange');
  const first = requests[0]!;
  t.match(first, { method: 'POST', url: `${base}/mcp`, status: 401 }, 'the first call is refused');
  t.ok(
    requests.some((r) => r.url === `${base}/.well-known/oauth-protected-resource/mcp` && r.status === 200),
    'read the resource metadata named by the challenge',
  );
  const token = requests.find((r) => r.url === `${base}/oauth2/token`)!;
  t.equal(token.status, 200);
  const form = new URLSearchParams(token.body);
  t.equal(form.get('grant_type'), JWT_BEARER);
  t.equal(form.get('resource'), `${base}/mcp`, 'RFC 8707 resource is the MCP endpoint');
  t.notOk(
    requests.some((r) => /token=|assertion=|eyJ/.test(new URL(r.url).search)),
    'no credential in any URL',
  );
  t.equal(client.getServerVersion()?.name, 'agent-platform');
  t.match(client.getInstructions(), /idempotency_key/);

  const { tools } = await client.listTools();
  const names = tools.map((tool) => tool.name);
  for (const name of [
    'getAgentCapabilities',
    'listAgentCompanies',
    'getAgentCompanyRun',
    'listInsightBoards',
    'getInsightBoard',
    'getInsightBoardPublication',
    'publishInsightBoard',
    'unpublishInsightBoard',
    'rotateInsightBoardLink',
    'restoreAgent',
  ]) {
    t.ok(names.includes(name), `tool ${name}`);
  }
  const list = tools.find((tool) => tool.name === 'listInsightBoards')!;
  t.equal(list.annotations?.readOnlyHint, true);
  t.match(
    list.inputSchema,
    { type: 'object', properties: { limit: { minimum: 1, maximum: 100 }, cursor: { minimum: 0, maximum: 1_000_000 } } },
    'spec bounds in the input schema',
  );
  const publish = tools.find((tool) => tool.name === 'publishInsightBoard')!;
  t.equal(publish.annotations?.readOnlyHint, false);
  t.match(publish.inputSchema, { required: ['boardId', 'visibility', 'idempotency_key'] });
  t.match(publish.description, /svc:boards:publish/);

  const caps = await client.callTool({ name: 'getAgentCapabilities', arguments: {} });
  t.notOk(caps.isError);
  t.match(caps.structuredContent, { identity: { registration_id: reg.registration.id }, claim: { state: 'claimed' } });
});

t.test('a mutation over MCP: recorded under its idempotency key, shared with the HTTP Agent API', async (t) => {
  const reg = await registerAnonymously(true);
  const { client } = await connect(reg.identity.assertion);
  const { agentId } = await scopesOf(reg);
  const args = {
    title: 'Pipeline',
    scope_type: 'agent',
    scope_id: agentId,
    content: { cards: [1, 2] },
    idempotency_key: 'mcp-create-0001',
  };
  const created = await client.callTool({ name: 'createInsightBoard', arguments: args });
  t.notOk(created.isError, JSON.stringify(created.content));
  const board = created.structuredContent as { id: string; latest_version: number };
  t.equal(board.latest_version, 1);

  const again = await client.callTool({ name: 'createInsightBoard', arguments: args });
  t.same(again.structuredContent, created.structuredContent, 'the identical call replays the recorded result');
  t.same(again._meta, { idempotency_replayed: true });
  const boards = await db.any(sql.unsafe`select id from insight_boards where title = 'Pipeline'`);
  t.equal(boards.length, 1, 'one board');

  const other = await client.callTool({ name: 'createInsightBoard', arguments: { ...args, title: 'Another' } });
  t.equal(other.isError, true);
  t.match(errorOf(other), { code: 'idempotency_conflict', next_action: 'use_new_idempotency_key' });

  // The same key and body over HTTP is the same request: the MCP outcome comes back.
  const httpToken = await tokenFor(reg.identity.assertion, `${base}/api/agent`);
  const { idempotency_key, ...body } = args;
  const viaHttp = await fetch(`${base}/api/agent/v1/boards`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${httpToken}`,
      'idempotency-key': idempotency_key,
      'content-type': 'application/json',
    },
    body: JSON.stringify(body),
  });
  t.equal(viaHttp.status, 201);
  t.equal(viaHttp.headers.get('idempotency-replayed'), 'true');
  t.equal(((await viaHttp.json()) as { id: string }).id, board.id);

  const published = await client.callTool({
    name: 'publishInsightBoard',
    arguments: { boardId: board.id, visibility: 'private', idempotency_key: 'mcp-publish-0001' },
  });
  t.match(published.structuredContent, {
    state: 'published',
    publication: { board_id: board.id, visibility: 'private' },
    link: null,
  });
  const read = await client.callTool({ name: 'getInsightBoardPublication', arguments: { boardId: board.id } });
  t.match(read.structuredContent, { state: 'published', version: 1 });
  const got = await client.callTool({ name: 'getInsightBoard', arguments: { boardId: board.id } });
  t.same((got.structuredContent as { content: unknown }).content, { cards: [1, 2] });
});

t.test('refusals are tool errors with the Agent API codes', async (t) => {
  const reg = await registerAnonymously(true);
  const { client } = await connect(reg.identity.assertion);
  const plan = await client.callTool({ name: 'listAgentCompanies', arguments: {} });
  t.match(errorOf(plan), { code: 'plan_required', next_action: 'change_plan' }, 'the free plan has no company work');

  const bounds = await client.callTool({ name: 'listInsightBoards', arguments: { limit: 0 } });
  t.match(errorOf(bounds), {
    code: 'invalid_request',
    next_action: 'fix_request',
    details: [{ path: 'arguments.limit' }],
  });
  const unknown = await client.callTool({ name: 'listInsightBoards', arguments: { colour: 'red' } });
  t.match(errorOf(unknown), { code: 'invalid_request', message: /colour/ });
  const stranger = await scopesOf(await registerAnonymously(true));
  const theirs = await client.callTool({
    name: 'createInsightBoard',
    arguments: {
      title: 'Theirs',
      scope_type: 'company',
      scope_id: stranger.companyId,
      idempotency_key: 'mcp-foreign-scope-1',
    },
  });
  t.match(
    errorOf(theirs),
    { code: 'not_found', next_action: 'reread_list' },
    "another workspace's company is no scope",
  );
  t.equal(
    Number(await db.oneFirst(sql.unsafe`select count(*) from insight_boards where title = 'Theirs'`)),
    0,
    'no board written',
  );
  const missingKey = await client.callTool({ name: 'unpublishInsightBoard', arguments: { boardId: 'x' } });
  t.match(
    errorOf(missingKey),
    { code: 'invalid_idempotency_key', next_action: 'fix_request' },
    'the same code as the HTTP header',
  );
  const shortKey = await client.callTool({
    name: 'restoreAgent',
    arguments: { agentRef: 'x', idempotency_key: 'short' },
  });
  t.match(errorOf(shortKey), { code: 'invalid_idempotency_key' });
  const missing = await client.callTool({
    name: 'getInsightBoard',
    arguments: { boardId: '00000000-0000-4000-8000-000000000000' },
  });
  t.match(errorOf(missing), { code: 'not_found', next_action: 'reread_list' });
  const restore = await client.callTool({
    name: 'restoreAgent',
    arguments: { agentRef: '00000000-0000-4000-8000-000000000000', idempotency_key: 'restore-missing-1' },
  });
  t.match(errorOf(restore), { code: 'not_found' });
  const noTool = await client.callTool({ name: 'dropDatabase', arguments: {} });
  t.match(errorOf(noTool), { code: 'invalid_request' });
});

t.test('authorization at the HTTP level: audience, scope, method, origin', async (t) => {
  const reg = await registerAnonymously(false);
  const agentToken = await tokenFor(reg.identity.assertion, `${base}/api/agent`);
  const mcpToken = await tokenFor(reg.identity.assertion, `${base}/mcp`);
  const init = rpc('initialize', {
    protocolVersion: '2025-11-25',
    capabilities: {},
    clientInfo: { name: 'raw', version: '1' },
  });

  const none = await fetch(`${base}/mcp`, { method: 'POST', headers: MCP_HEADERS, body: init });
  t.equal(none.status, 401);
  t.match(
    none.headers.get('www-authenticate'),
    `Bearer resource_metadata="${base}/.well-known/oauth-protected-resource/mcp"`,
  );
  t.match(await none.json(), { code: 'invalid_credential', next_action: 'reauthenticate' });

  const wrongAudience = await fetch(`${base}/mcp`, {
    method: 'POST',
    headers: { ...MCP_HEADERS, authorization: `Bearer ${agentToken}` },
    body: init,
  });
  t.equal(wrongAudience.status, 401, 'a token for /api/agent is refused at /mcp');
  t.match(wrongAudience.headers.get('www-authenticate'), /error="invalid_token"/);
  const backwards = await fetch(`${base}/api/agent/v1/me`, { headers: { authorization: `Bearer ${mcpToken}` } });
  t.equal(backwards.status, 401, 'and a /mcp token at the Agent API');

  const ok = await fetch(`${base}/mcp`, {
    method: 'POST',
    headers: { ...MCP_HEADERS, authorization: `Bearer ${mcpToken}` },
    body: init,
  });
  t.equal(ok.status, 200);
  t.match(await ok.json(), {
    result: { serverInfo: { name: 'agent-platform' }, capabilities: { tools: {}, resources: {} } },
  });

  // Before a claim there is no svc:boards:publish: 403 insufficient_scope naming it.
  const call = rpc('tools/call', {
    name: 'rotateInsightBoardLink',
    arguments: { boardId: 'b', idempotency_key: 'rotate-0001' },
  });
  const denied = await fetch(`${base}/mcp`, {
    method: 'POST',
    headers: { ...MCP_HEADERS, authorization: `Bearer ${mcpToken}` },
    body: call,
  });
  t.equal(denied.status, 403);
  t.equal(
    denied.headers.get('www-authenticate'),
    `Bearer resource_metadata="${base}/.well-known/oauth-protected-resource/mcp", error="insufficient_scope", scope="svc:boards:publish"`,
  );
  t.match(await denied.json(), { code: 'scope_denied', next_action: 'claim_account' });

  const get = await fetch(`${base}/mcp`, {
    headers: { accept: 'text/event-stream', authorization: `Bearer ${mcpToken}` },
  });
  t.equal(get.status, 405, 'stateless: no server-initiated stream');
  t.equal(get.headers.get('allow'), 'POST');
  const getAnonymous = await fetch(`${base}/mcp`, { headers: { accept: 'text/event-stream' } });
  t.equal(getAnonymous.status, 401);

  const foreign = await fetch(`${base}/mcp`, {
    method: 'POST',
    headers: { ...MCP_HEADERS, origin: 'https://evil.example', authorization: `Bearer ${mcpToken}` },
    body: init,
  });
  t.equal(foreign.status, 403, 'a browser page of another origin is refused');

  // One JSON-RPC message per POST (batches left MCP in 2025-06-18).
  const batch = await fetch(`${base}/mcp`, {
    method: 'POST',
    headers: { ...MCP_HEADERS, authorization: `Bearer ${mcpToken}` },
    body: `[${call},${init}]`,
  });
  t.equal(batch.status, 400);
  t.match(await batch.json(), { jsonrpc: '2.0', id: null, error: { code: -32600 } });
  const garbled = await fetch(`${base}/mcp`, {
    method: 'POST',
    headers: { ...MCP_HEADERS, authorization: `Bearer ${mcpToken}` },
    body: '{"jsonrpc": "2.0",',
  });
  t.equal(garbled.status, 400);
  t.match(await garbled.json(), { error: { code: -32700 } });
  const garbledAnonymous = await fetch(`${base}/mcp`, { method: 'POST', headers: MCP_HEADERS, body: '{"jsonrpc"' });
  t.equal(garbledAnonymous.status, 401, 'without a token the 401 comes first, whatever the body');
  const badArgs = await fetch(`${base}/mcp`, {
    method: 'POST',
    headers: { ...MCP_HEADERS, authorization: `Bearer ${mcpToken}` },
    body: rpc('tools/call', { name: 'getAgentMe', arguments: [] }, 7),
  });
  t.match(await badArgs.json(), { id: 7, error: { code: -32602 } });

  t.notMatch(api.logs(), mcpToken.slice(-20), 'the token is never logged');
});

t.test('contract documents are resources with the bytes the manifest hashes', async (t) => {
  const reg = await registerAnonymously(false);
  const { client } = await connect(reg.identity.assertion);
  const { resources } = await client.listResources();
  const manifest = (await (await fetch(`${base}/agent-public-contracts/v1/knowledge-manifest.json`)).json()) as {
    documents: Array<{ url: string; sha256: string }>;
  };
  t.ok(resources.some((r) => r.uri === `${base}/openapi.json` && r.mimeType === 'application/json'));
  t.ok(resources.some((r) => r.uri === `${base}/agent-public-contracts/v1/knowledge-manifest.json`));
  for (const doc of manifest.documents) {
    const read = await client.readResource({ uri: doc.url });
    const text = (read.contents[0] as { text: string }).text;
    t.equal(createHash('sha256').update(text, 'utf8').digest('hex'), doc.sha256, `${doc.url} matches the manifest`);
  }
  await t.rejects(client.readResource({ uri: `${base}/etc/passwd` }), { code: -32002, message: /No resource/ });
});
