// An agent never acts above the person who claimed it. Vic, a Viewer of
// Ada's organization, claims an agent into it through the whole ceremony
// (service_auth, claim page, complete, token exchange): the agent reads, but
// creating, saving and publishing boards answer 403 insufficient_role, over
// HTTP and as MCP tools, and nothing is written (the claim page told Vic so). The role is read at each
// request: Ada raising Vic to Member widens the agent at its next request
// (the refused request, never recorded, now runs under the same key); Ada
// lowering Vic back narrows it; removing Vic unlinks it. Capabilities say
// what the agent may do for its claimer's role.
import t from 'tap';
import { createUser } from '../../../../core/accounts/users.ts';
import { signPlatformToken } from '../../../../core/auth/platform-token.ts';
import { sql } from '../../../../core/db/pool.ts';
import { createTenant } from '../../../../core/tenants/tenants.ts';
import { buildTestApp } from '../../../helpers/app.ts';
import { TEST_SECRET } from '../../../helpers/config.ts';
import { createTestDatabase } from '../../../helpers/db.ts';
import { createBoardScopes } from '../../../helpers/fixtures.ts';
import { waitFor } from '../../../helpers/wait.ts';
import { injectMcp } from '../../../helpers/mcp.ts';
import { agent as agentCalls, Browser, pagePath, PASSWORD, register } from '../identity/claim-flow.ts';

const databaseUrl = await createTestDatabase(t);
const { app, db, config } = await buildTestApp(t, databaseUrl);
// A second api replica: a role change reaches it by NOTIFY.
const replica = await buildTestApp(t, databaseUrl);

const ada = await createUser(db, { email: 'ada@example.test', password: PASSWORD });
const vic = await createUser(db, { email: 'vic@example.test', password: PASSWORD });
const org = await createTenant(db, ada.id, 'Ada Org');
await db.query(
  sql.unsafe`insert into tenant_memberships (tenant_id, user_id, role) values (${org.id}, ${vic.id}, 'viewer')`,
);
const adaToken = await signPlatformToken({ userId: ada.id }, Buffer.from(TEST_SECRET, 'base64'), config.baseUrl);
const asAda = { authorization: `Bearer ${adaToken}`, 'x-tenant-id': org.id };
const { companyId } = await createBoardScopes(db, org.id);

// Ada's board, made on the platform API.
const adaBoard = await app.inject({
  method: 'POST',
  url: '/api/boards',
  headers: asAda,
  payload: { title: "Ada's board", scopeType: 'company', scopeId: companyId, content: { v: 1 } },
});
if (adaBoard.statusCode !== 201) throw new Error(`board: ${adaBoard.body}`);
const boardId = adaBoard.json().id as string;

/** Vic claims a service_auth agent into Ada Org on the claim page; its tokens for both resources. */
async function vicsAgent() {
  const reg = await register(db, 'service_auth', 'vic@example.test');
  const calls = agentCalls(app);
  const browser = new Browser(app, pagePath(await calls.claim(reg.claimToken, 'vic@example.test')));
  await browser.signIn('vic@example.test');
  const page = (await browser.get()).body;
  const { code } = await browser.confirm({ organization_id: org.id });
  const done = await calls.complete(reg.claimToken, code);
  if (done.statusCode !== 200) throw new Error(`complete: ${done.body}`);
  const assertion = done.json().identity.assertion as string;
  const token = async (resource: string) => {
    const res = await calls.exchange(assertion, resource);
    if (res.statusCode !== 200) throw new Error(`token: ${res.body}`);
    return res.json().access_token as string;
  };
  return { api: await token(`${config.baseUrl}/api/agent`), mcp: await token(`${config.baseUrl}/mcp`), page };
}

const agentHeaders = (token: string, key?: string) => ({
  authorization: `Bearer ${token}`,
  ...(key ? { 'idempotency-key': key } : {}),
});
const createBoard = (token: string, key: string, on = app) =>
  on.inject({
    method: 'POST',
    url: '/api/agent/v1/boards',
    headers: agentHeaders(token, key),
    payload: { title: "Vic's agent's board", scope_type: 'company', scope_id: companyId },
  });
const saveAdaBoard = (token: string, key: string) =>
  app.inject({
    method: 'PUT',
    url: `/api/agent/v1/boards/${boardId}/content`,
    headers: agentHeaders(token, key),
    payload: { content: { overwritten: true } },
  });
const publishAdaBoard = (token: string, key: string) =>
  app.inject({
    method: 'POST',
    url: `/api/agent/v1/boards/${boardId}/publish`,
    headers: agentHeaders(token, key),
    payload: { visibility: 'private' },
  });
const capabilities = async (token: string) =>
  (await app.inject({ url: '/api/agent/v1/capabilities', headers: agentHeaders(token) })).json();

async function tool(token: string, name: string, args: Record<string, unknown>) {
  const res = await injectMcp(app, token, 'tools/call', { name, arguments: args });
  if (res.statusCode !== 200) return { status: res.statusCode, isError: true, body: res.json() };
  const result = res.json().result as { isError?: boolean; content: Array<{ text: string }> };
  return { status: 200, isError: result.isError ?? false, body: JSON.parse(result.content[0]!.text) };
}

const boards = async () =>
  Number(await db.oneFirst(sql.unsafe`select count(*)::int from insight_boards where tenant_id = ${org.id}`));
const latestVersion = async () =>
  Number(await db.oneFirst(sql.unsafe`select latest_version from insight_boards where id = ${boardId}`));
const setRole = async (role: 'viewer' | 'member') => {
  const res = await app.inject({
    method: 'PATCH',
    url: `/api/tenants/members/${vic.id}`,
    headers: asAda,
    payload: { role },
  });
  if (res.statusCode !== 200) throw new Error(`role: ${res.body}`);
};
const REFUSED = { code: 'insufficient_role', next_action: 'raise_claimer_role' };

t.test("a Viewer's agent reads but changes nothing (HTTP and MCP)", async (t) => {
  const vicAgent = await vicsAgent();
  t.match(
    vicAgent.page,
    /Ada Org \(the agent will act inside it; you are a Viewer there: the agent will only read\)/,
    'the claim page says so',
  );
  const before = { boards: await boards(), version: await latestVersion() };

  const created = await createBoard(vicAgent.api, 'viewer-create-1');
  t.equal(created.statusCode, 403, created.body);
  t.match(created.json(), { ...REFUSED, message: /createInsightBoard needs .* Member .*; they are a Viewer/ });
  const saved = await saveAdaBoard(vicAgent.api, 'viewer-save-1');
  t.equal(saved.statusCode, 403, "saving an Admin's board");
  t.match(saved.json(), REFUSED);
  const published = await publishAdaBoard(vicAgent.api, 'viewer-publish-1');
  t.equal(published.statusCode, 403);
  t.match(published.json(), REFUSED);

  const mcpCreate = await tool(vicAgent.mcp, 'createInsightBoard', {
    title: 'via mcp',
    scope_type: 'company',
    scope_id: companyId,
    idempotency_key: 'viewer-mcp-create-1',
  });
  t.ok(mcpCreate.isError, 'the MCP tool is refused alike');
  t.match(mcpCreate.body, REFUSED);
  const mcpSave = await tool(vicAgent.mcp, 'saveInsightBoardVersion', {
    boardId,
    content: { overwritten: true },
    idempotency_key: 'viewer-mcp-save-1',
  });
  t.match(mcpSave, { isError: true, body: REFUSED });

  t.same({ boards: await boards(), version: await latestVersion() }, before, 'nothing written');

  const read = await app.inject({ url: `/api/agent/v1/boards/${boardId}`, headers: agentHeaders(vicAgent.api) });
  t.equal(read.statusCode, 200, 'reads work');
  t.match(read.json(), { id: boardId, content: { v: 1 } });
  t.match(await tool(vicAgent.mcp, 'listInsightBoards', {}), { isError: false, body: { items: [{ id: boardId }] } });

  const caps = await capabilities(vicAgent.api);
  t.equal(caps.access.claimer_role, 'viewer');
  t.ok(caps.access.allowed.includes('listInsightBoards'));
  t.notOk(caps.access.allowed.includes('createInsightBoard'));
  t.match(caps.access.refused.map((r: { operation: string }) => r.operation).sort(), [
    'createInsightBoard',
    'publishInsightBoard',
    'restoreAgent',
    'rotateInsightBoardLink',
    'saveInsightBoardVersion',
    'unpublishInsightBoard',
  ]);
  t.match(
    caps.next_actions.filter((n: { action: string }) => n.action === 'raise_claimer_role'),
    [
      {
        action: 'raise_claimer_role',
        actor: 'person',
        method: 'PATCH',
        endpoint: `${config.baseUrl}/api/tenants/members/${vic.id}`,
      },
    ],
  );
});

t.test('Viewer -> Member widens the agent at its next request; Member -> Viewer narrows it', async (t) => {
  const vicAgent = await vicsAgent();
  t.equal((await createBoard(vicAgent.api, 'widen-create-1')).statusCode, 403);
  t.equal((await createBoard(vicAgent.api, 'widen-create-1', replica.app)).statusCode, 403, 'on the replica too');

  await setRole('member');
  // The refusal was not recorded: the identical request under the same key now runs.
  const created = await createBoard(vicAgent.api, 'widen-create-1');
  t.equal(created.statusCode, 201, created.body);
  t.equal((await saveAdaBoard(vicAgent.api, 'widen-save-1')).statusCode, 200);
  t.equal((await publishAdaBoard(vicAgent.api, 'widen-publish-1')).statusCode, 200);
  const mcpSave = await tool(vicAgent.mcp, 'saveInsightBoardVersion', {
    boardId,
    content: { by: 'member' },
    idempotency_key: 'widen-mcp-save-1',
  });
  t.equal(mcpSave.isError, false, JSON.stringify(mcpSave.body));
  const caps = await capabilities(vicAgent.api);
  t.equal(caps.access.claimer_role, 'member');
  t.same(
    caps.access.refused,
    [{ operation: 'restoreAgent', needs: 'admin' }],
    'a Member claimer: everything but restoring',
  );
  // The replica hears the membership's NOTIFY.
  await waitFor('the replica to see the Member role', async () => {
    const res = await createBoard(vicAgent.api, `widen-replica-${Date.now()}`, replica.app);
    return res.statusCode === 201 ? res : null;
  });

  await setRole('viewer');
  const version = await latestVersion();
  const narrowed = await saveAdaBoard(vicAgent.api, 'narrow-save-1');
  t.equal(narrowed.statusCode, 403, 'refused at its next request');
  t.match(narrowed.json(), REFUSED);
  const mcpNarrowed = await tool(vicAgent.mcp, 'saveInsightBoardVersion', {
    boardId,
    content: { by: 'viewer' },
    idempotency_key: 'narrow-mcp-save-1',
  });
  t.match(mcpNarrowed, { isError: true, body: REFUSED }, 'and as an MCP tool');
  // An identical retry of a recorded success is refused too: no replay past the role.
  t.equal((await createBoard(vicAgent.api, 'widen-create-1')).statusCode, 403, 'no replay past the role');
  t.equal(await latestVersion(), version, 'nothing written');
  await waitFor('the replica to see the Viewer role', async () => {
    const res = await createBoard(vicAgent.api, `narrow-replica-${Date.now()}`, replica.app);
    return res.statusCode === 403 ? res : null;
  });
});

t.test('removing the claimer stops the agent at its next request', async (t) => {
  const vicAgent = await vicsAgent();
  t.equal((await capabilities(vicAgent.api)).access.claimer_role, 'viewer');
  const removed = await app.inject({ method: 'DELETE', url: `/api/tenants/members/${vic.id}`, headers: asAda });
  t.equal(removed.statusCode, 204);
  const res = await app.inject({ url: '/api/agent/v1/boards', headers: agentHeaders(vicAgent.api) });
  t.equal(res.statusCode, 401);
  t.match(res.json(), { code: 'principal_not_linked' });
  t.match(
    await tool(vicAgent.mcp, 'listInsightBoards', {}),
    { status: 401, body: { code: 'principal_not_linked' } },
    'the MCP endpoint refuses it too',
  );
});
