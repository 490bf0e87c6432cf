// Insight boards on the Agent API: reads, bounds, isolation, scopes, the
// public-publish approval flow, hosted links, rotation, unpublish, and the
// Idempotency-Key contract of the mutations.
import t from 'tap';
import { z } from 'zod';
import { sql } from '../../../../core/db/pool.ts';
import { createRegistration } from '../../../../core/identity/registrations.ts';
import type { AgentScope } from '../../../../core/identity/tokens.ts';
import { buildTestApp } from '../../../helpers/app.ts';
import { createTestDatabase } from '../../../helpers/db.ts';
import { agentAccessToken } from '../../../helpers/principals.ts';
import { createBoardScopes, createMember, markClaimed } from '../../../helpers/fixtures.ts';
import { tablesHolding } from '../../../helpers/scan-tables.ts';

const databaseUrl = await createTestDatabase(t);
const { app, db, config } = await buildTestApp(t, databaseUrl);
const ALL: AgentScope[] = ['svc:boards:read', 'svc:boards:publish'];

async function agent(scopes: AgentScope[] = ALL) {
  const { registration } = await createRegistration(db, { type: 'anonymous', ip: '10.9.0.1', claimTokenTtlS: 600 });
  await markClaimed(db, registration.id);
  const claims = {
    principalId: registration.principal_id,
    registrationId: registration.id,
    tenantId: registration.tenant_id,
  };
  const token = await agentAccessToken(app, config, registration, scopes);
  return { ...claims, token, ...(await createBoardScopes(db, claims.tenantId)) };
}
type Agent = Awaited<ReturnType<typeof agent>>;

let keys = 0;
const newKey = () => `test-key-${++keys}-${Date.now()}`;
const get = (a: Agent, url: string) =>
  app.inject({ method: 'GET', url, headers: { authorization: `Bearer ${a.token}` } });
const send = (a: Agent, method: 'POST' | 'PUT', url: string, payload: object, key: string | null = newKey()) =>
  app.inject({
    method,
    url,
    payload,
    headers: { authorization: `Bearer ${a.token}`, ...(key ? { 'idempotency-key': key } : {}) },
  });
const createBoard = async (
  a: Agent,
  title = 'Revenue',
  content: object | null = { widgets: [{ kind: 'metric', value: 42 }] },
  scope = { scope_type: 'company', scope_id: a.companyId },
) => {
  const res = await send(a, 'POST', '/api/agent/v1/boards', { title, ...scope, ...(content ? { content } : {}) });
  if (res.statusCode !== 201) throw new Error(`create failed: ${res.body}`);
  return res.json().id as string;
};
// A tenant Admin of the agent's workspace (a person, on the platform API).
async function adminOf(a: Agent) {
  const person = await createMember(db, 'admin');
  await db.query(
    sql.unsafe`insert into tenant_memberships (tenant_id, user_id, role) values (${a.tenantId}, ${person.userId}, 'admin')`,
  );
  return (action: 'approve' | 'deny', approvalId: string) =>
    app.inject({
      method: 'POST',
      url: `/api/boards/approvals/${approvalId}/${action}`,
      headers: { authorization: `Bearer ${person.token}`, 'x-tenant-id': a.tenantId },
    });
}
const hosted = (url: string) =>
  app.inject({ method: 'GET', url: new URL(url).pathname, headers: { accept: 'application/json' } });

const me = await agent();
const other = await agent();

t.test('create, save a version, list, read', async (t) => {
  const id = await createBoard(me);
  const saved = await send(me, 'PUT', `/api/agent/v1/boards/${id}/content`, { content: { widgets: [] } });
  t.equal(saved.statusCode, 200);
  t.match(saved.json(), { id, latest_version: 2, content: { widgets: [] } });
  const board = await get(me, `/api/agent/v1/boards/${id}`);
  t.equal(board.statusCode, 200);
  t.match(board.json(), {
    id,
    title: 'Revenue',
    scope_type: 'company',
    scope_id: me.companyId,
    latest_version: 2,
    content: { widgets: [] },
  });
  const list = await get(me, '/api/agent/v1/boards');
  t.equal(list.statusCode, 200);
  t.ok(list.json().items.some((b: { id: string }) => b.id === id));
  t.equal(list.json().next_cursor, null);
});

t.test('paging by position and filters', async (t) => {
  const a = await agent();
  const ids = [
    await createBoard(a, 'A'),
    await createBoard(a, 'B', { widgets: [] }, { scope_type: 'agent', scope_id: a.agentId }),
    await createBoard(a, 'C'),
  ];
  const first = (await get(a, '/api/agent/v1/boards?limit=2')).json();
  t.same(
    first.items.map((b: { id: string }) => b.id),
    ids.slice(0, 2),
  );
  t.equal(first.next_cursor, first.items[1].position);
  const second = (await get(a, `/api/agent/v1/boards?limit=2&cursor=${first.next_cursor}`)).json();
  t.same(
    second.items.map((b: { id: string }) => b.id),
    ids.slice(2),
  );
  t.equal(second.next_cursor, null);
  const agents = (await get(a, `/api/agent/v1/boards?scopeType=agent&scopeId=${a.agentId}`)).json();
  t.same(
    agents.items.map((b: { id: string }) => b.id),
    [ids[1]],
  );
  t.same((await get(a, '/api/agent/v1/boards?scopeId=nobody')).json().items, []);
});

t.test('positions are per workspace: 1, 2, 3 in each, whatever other workspaces do', async (t) => {
  const [a, b] = [await agent(), await agent()];
  for (const title of ['one', 'two']) {
    await createBoard(a, title);
    await createBoard(b, title);
  }
  // Created at once: still distinct, consecutive positions.
  await Promise.all(['x', 'y', 'z'].map((title) => createBoard(a, title)));
  const positions = async (who: Agent) =>
    (await get(who, '/api/agent/v1/boards?limit=100')).json().items.map((x: { position: number }) => x.position);
  t.same(await positions(a), [1, 2, 3, 4, 5]);
  t.same(await positions(b), [1, 2]);
});

t.test('bounds -> 400 invalid_request', async (t) => {
  const long = 'x'.repeat(257);
  for (const url of [
    `/api/agent/v1/boards/${long}`,
    `/api/agent/v1/boards/${long}/publication`,
    '/api/agent/v1/boards?cursor=-1',
    '/api/agent/v1/boards?cursor=1000001',
    '/api/agent/v1/boards?cursor=abc',
    '/api/agent/v1/boards?limit=0',
    '/api/agent/v1/boards?limit=101',
    '/api/agent/v1/boards?scopeType=team',
    `/api/agent/v1/boards?scopeId=${'s'.repeat(129)}`,
  ]) {
    const res = await get(me, url);
    t.equal(res.statusCode, 400, url.slice(0, 60));
    t.match(res.json(), { code: 'invalid_request', next_action: 'fix_request' });
  }
  t.equal((await get(me, `/api/agent/v1/boards/${'x'.repeat(256)}`)).statusCode, 404, '256 characters is in bounds');
  t.equal((await get(me, '/api/agent/v1/boards?cursor=1000000&limit=100')).statusCode, 200);
  const bad = await send(me, 'POST', `/api/agent/v1/boards/${long}/publish`, { visibility: 'private' });
  t.equal(bad.statusCode, 400);
});

t.test("another workspace's board is a 404, like a missing one", async (t) => {
  const id = await createBoard(other);
  for (const url of [
    `/api/agent/v1/boards/${id}`,
    `/api/agent/v1/boards/${id}/publication`,
    '/api/agent/v1/boards/00000000-0000-4000-8000-000000000000',
  ]) {
    const res = await get(me, url);
    t.equal(res.statusCode, 404);
    t.match(res.json(), { code: 'not_found' });
  }
  for (const [path, body] of [
    ['publish', { visibility: 'private' }],
    ['unpublish', {}],
    ['rotate-link', {}],
  ] as const) {
    t.equal((await send(me, 'POST', `/api/agent/v1/boards/${id}/${path}`, body)).statusCode, 404, path);
  }
  t.equal((await send(me, 'PUT', `/api/agent/v1/boards/${id}/content`, { content: {} })).statusCode, 404);
  t.notOk((await get(me, '/api/agent/v1/boards')).json().items.some((b: { id: string }) => b.id === id));
});

t.test('a missing scope -> 403 scope_denied', async (t) => {
  const reader = await agent(['svc:boards:read']);
  const writer = await agent(['svc:boards:publish']);
  const id = await createBoard(writer);
  const refused = await send(reader, 'POST', `/api/agent/v1/boards/${id}/publish`, { visibility: 'private' });
  t.equal(refused.statusCode, 403);
  t.match(refused.json(), { code: 'scope_denied' });
  t.equal((await get(writer, '/api/agent/v1/boards')).json().code, 'scope_denied');
  t.equal((await app.inject({ url: '/api/agent/v1/boards' })).statusCode, 401);
});

t.test('private publish at once; the publication read shows no secret', async (t) => {
  const id = await createBoard(me);
  const empty = (await get(me, `/api/agent/v1/boards/${id}/publication`)).json();
  t.match(empty, { board_id: id, state: 'unpublished', version: null, active_link: null });
  const res = await send(me, 'POST', `/api/agent/v1/boards/${id}/publish`, { visibility: 'private' });
  t.equal(res.statusCode, 200);
  t.match(res.json(), {
    state: 'published',
    publication: { state: 'published', version: 1, visibility: 'private', active_link: null },
    link: null,
  });
  t.equal(
    (await send(me, 'POST', `/api/agent/v1/boards/${id}/publish`, { version: 9, visibility: 'private' })).json().code,
    'version_not_found',
  );
  const rotate = await send(me, 'POST', `/api/agent/v1/boards/${id}/rotate-link`, {});
  t.equal(rotate.statusCode, 409);
  t.equal(rotate.json().code, 'not_published_publicly');
  const empty2 = await createBoard(me, 'Empty', null);
  t.equal(
    (await send(me, 'POST', `/api/agent/v1/boards/${empty2}/publish`, { visibility: 'private' })).statusCode,
    404,
  );
});

t.test(
  'public publish: approval, identical retry, not covering another request, link, rotate, unpublish',
  async (t) => {
    const decide = await adminOf(me);
    const id = await createBoard(me);
    await send(me, 'PUT', `/api/agent/v1/boards/${id}/content`, { content: { widgets: ['v2'] } });
    const body = { version: 1, visibility: 'public' };
    const asked = await send(me, 'POST', `/api/agent/v1/boards/${id}/publish`, body);
    t.equal(asked.statusCode, 200);
    const { approval } = asked.json();
    t.match(asked.json(), {
      state: 'approval_required',
      next_action: 'await_approval',
      approval: { state: 'pending' },
    });
    t.equal(approval.approve_url, `${config.baseUrl}/boards/approvals/${approval.id}`, 'the page a person opens');
    t.notMatch(approval.approve_url, new RegExp(me.token.slice(0, 20)), 'no credential in the URL');
    // Asking again before the decision points at the same approval.
    t.equal((await send(me, 'POST', `/api/agent/v1/boards/${id}/publish`, body)).json().approval.id, approval.id);
    t.equal((await get(me, `/api/agent/v1/boards/${id}/publication`)).json().state, 'unpublished');

    const approved = await decide('approve', approval.id);
    t.equal(approved.statusCode, 200);
    t.match(approved.json(), { id: approval.id, state: 'approved', version: 1, visibility: 'public' });

    // A different request is not covered by that approval.
    const latest = await send(me, 'POST', `/api/agent/v1/boards/${id}/publish`, { visibility: 'public' });
    t.equal(latest.json().state, 'approval_required');
    t.not(latest.json().approval.id, approval.id);

    const published = await send(me, 'POST', `/api/agent/v1/boards/${id}/publish`, body);
    t.equal(published.statusCode, 200);
    const { link, publication } = published.json();
    t.match(publication, { state: 'published', version: 1, visibility: 'public', active_link: { created_at: String } });
    t.ok(link.secret && link.url.endsWith(link.secret));
    const stored = await db.anyFirst(
      sql.type(z.object({ secret_hash: z.string() }))`select secret_hash from board_links`,
    );
    t.notOk(stored.includes(link.secret), 'stored only as a hash');
    const open = await hosted(link.url);
    t.equal(open.statusCode, 200);
    t.same(open.json(), { title: 'Revenue', version: 1, content: { widgets: [{ kind: 'metric', value: 42 }] } });
    // The approval was consumed: the same request asks again.
    t.equal((await send(me, 'POST', `/api/agent/v1/boards/${id}/publish`, body)).json().state, 'approval_required');

    const read = await get(me, `/api/agent/v1/boards/${id}/publication`);
    t.notMatch(read.body, link.secret);
    t.notOk('secret' in read.json().active_link);

    const rotated = await send(me, 'POST', `/api/agent/v1/boards/${id}/rotate-link`, {});
    t.equal(rotated.statusCode, 200);
    t.match(rotated.json(), { board_id: id, revoked_links: 1, link: { secret: String, url: String } });
    t.not(rotated.json().link.secret, link.secret);
    t.equal((await hosted(link.url)).statusCode, 404, 'the old secret stops working at once');
    t.equal((await hosted(rotated.json().link.url)).statusCode, 200, 'the new one opens the board');
    t.notMatch((await get(me, `/api/agent/v1/boards/${id}/publication`)).body, rotated.json().link.secret);

    const unpublished = await send(me, 'POST', `/api/agent/v1/boards/${id}/unpublish`, {});
    t.equal(unpublished.statusCode, 200);
    t.match(unpublished.json(), { revoked_links: 1, publication: { state: 'unpublished', active_link: null } });
    t.equal((await hosted(rotated.json().link.url)).statusCode, 404);
  },
);

t.test('a link secret is nowhere at rest in plain: after publish, rotate and their identical retries', async (t) => {
  const decide = await adminOf(me);
  const id = await createBoard(me);
  const body = { version: 1, visibility: 'public' };
  const asked = await send(me, 'POST', `/api/agent/v1/boards/${id}/publish`, body);
  await decide('approve', asked.json().approval.id);
  const publishKey = newKey();
  const published = await send(me, 'POST', `/api/agent/v1/boards/${id}/publish`, body, publishKey);
  const first = published.json().link.secret as string;
  const rotateKey = newKey();
  const rotated = await send(me, 'POST', `/api/agent/v1/boards/${id}/rotate-link`, {}, rotateKey);
  const second = rotated.json().link.secret as string;
  t.ok(first && second && first !== second);

  // An identical retry answers what the first request answered, link included.
  for (const [res, path, key] of [
    [published, 'publish', publishKey],
    [rotated, 'rotate-link', rotateKey],
  ] as const) {
    const again = await send(me, 'POST', `/api/agent/v1/boards/${id}/${path}`, path === 'publish' ? body : {}, key);
    t.equal(again.headers['idempotency-replayed'], 'true', `${path} replayed`);
    t.same(again.json(), res.json(), `${path}: the same answer`);
  }
  for (const secret of [first, second]) t.same(await tablesHolding(db, secret), [], 'no table holds the secret');
  const sealed = await db.anyFirst(sql.type(z.object({ body: z.unknown() }))`
    select response_body as body from idempotency_records where key in (${publishKey}, ${rotateKey})`);
  t.match(
    sealed,
    [{ $sealed: /^[0-9a-f]{12}:v1\./ }, { $sealed: /^[0-9a-f]{12}:v1\./ }],
    'the recorded answers are sealed',
  );

  // A recorded answer moved to another record does not open there (sealed for its own).
  await db.query(
    sql.unsafe`update idempotency_records set response_body = (select response_body from idempotency_records where key = ${publishKey}) where key = ${rotateKey}`,
  );
  const moved = await send(me, 'POST', `/api/agent/v1/boards/${id}/rotate-link`, {}, rotateKey);
  t.equal(moved.statusCode, 409);
  t.match(moved.json(), { code: 'idempotency_conflict', next_action: 'use_new_idempotency_key' });
});

t.test('deny: the exact request stays refused; the approval cannot be decided twice', async (t) => {
  const decide = await adminOf(me);
  const id = await createBoard(me);
  const asked = (await send(me, 'POST', `/api/agent/v1/boards/${id}/publish`, { visibility: 'public' })).json();
  const denied = await decide('deny', asked.approval.id);
  t.equal(denied.statusCode, 200);
  t.equal(denied.json().state, 'denied');
  t.equal((await decide('approve', asked.approval.id)).statusCode, 409);
  const retry = await send(me, 'POST', `/api/agent/v1/boards/${id}/publish`, { visibility: 'public' });
  t.equal(retry.statusCode, 403);
  t.equal(retry.json().code, 'approval_denied');
  t.equal((await get(me, `/api/agent/v1/boards/${id}/publication`)).json().state, 'unpublished');
  // An Admin of another workspace cannot see or decide it.
  const stranger = await adminOf(other);
  t.equal((await stranger('approve', asked.approval.id)).statusCode, 404);
});

t.test('Idempotency-Key: missing, replay, conflict', async (t) => {
  const id = await createBoard(me);
  const url = `/api/agent/v1/boards/${id}/publish`;
  const missing = await send(me, 'POST', url, { visibility: 'private' }, null);
  t.equal(missing.statusCode, 400);
  t.equal(missing.json().code, 'invalid_idempotency_key');
  t.equal((await send(me, 'POST', url, { visibility: 'private' }, 'short')).json().code, 'invalid_idempotency_key');
  const key = newKey();
  const first = await send(me, 'POST', url, { visibility: 'private' }, key);
  t.equal(first.statusCode, 200);
  const replay = await send(me, 'POST', url, { visibility: 'private' }, key);
  t.equal(replay.statusCode, 200);
  t.equal(replay.headers['idempotency-replayed'], 'true');
  t.same(replay.json(), first.json());
  const conflict = await send(me, 'POST', url, { version: 1, visibility: 'private' }, key);
  t.equal(conflict.statusCode, 409);
  t.equal(conflict.json().code, 'idempotency_conflict');
  for (const path of ['unpublish', 'rotate-link']) {
    t.equal(
      (await send(me, 'POST', `/api/agent/v1/boards/${id}/${path}`, {}, null)).json().code,
      'invalid_idempotency_key',
      path,
    );
  }
  t.equal(
    (
      await send(
        me,
        'POST',
        '/api/agent/v1/boards',
        { title: 'x', scope_type: 'company', scope_id: me.companyId },
        null,
      )
    ).statusCode,
    400,
  );
  // Bodies are required JSON and strict.
  t.equal((await send(me, 'POST', `/api/agent/v1/boards/${id}/unpublish`, { extra: true })).statusCode, 400);
  t.equal((await send(me, 'POST', url, { visibility: 'friends' })).statusCode, 400);
});

t.test('the scope must name a company or company agent of the workspace: else 404, nothing written', async (t) => {
  const count = async (a: Agent) =>
    Number(await db.oneFirst(sql.unsafe`select count(*) from insight_boards where tenant_id = ${a.tenantId}`));
  const a = await agent();
  for (const scope of [
    { scope_type: 'company', scope_id: other.companyId },
    { scope_type: 'agent', scope_id: other.agentId },
    { scope_type: 'company', scope_id: a.agentId },
    { scope_type: 'agent', scope_id: a.companyId },
    { scope_type: 'company', scope_id: 'acme' },
    { scope_type: 'agent', scope_id: '00000000-0000-4000-8000-000000000000' },
  ]) {
    const res = await send(a, 'POST', '/api/agent/v1/boards', { title: 'Stolen', ...scope, content: { a: 1 } });
    t.equal(res.statusCode, 404, JSON.stringify(scope));
    t.match(res.json(), { code: 'not_found', next_action: 'reread_list' });
  }
  t.equal(await count(a), 0);
  t.equal(
    (await send(a, 'POST', '/api/agent/v1/boards', { title: 'Own', scope_type: 'agent', scope_id: a.agentId }))
      .statusCode,
    201,
  );
});
