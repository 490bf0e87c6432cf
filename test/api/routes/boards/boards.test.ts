// Insight boards on the platform API and the hosted page: people create and
// save boards, Admins decide approvals, the hosted link never reaches logs.
import t from 'tap';
import { sql } from '../../../../core/db/pool.ts';
import { createRegistration } from '../../../../core/identity/registrations.ts';
import { buildTestApp } from '../../../helpers/app.ts';
import { createTestDatabase } from '../../../helpers/db.ts';
import { createBoardScopes, createMember, markClaimed } from '../../../helpers/fixtures.ts';
import { agentAccessToken } from '../../../helpers/principals.ts';

const databaseUrl = await createTestDatabase(t);
const { app, db, config, logs } = await buildTestApp(t, databaseUrl, { LOG_LEVEL: 'info' });

// An agent workspace with a person Admin and a Viewer in it.
const { registration } = await createRegistration(db, { type: 'anonymous', ip: '10.9.0.2', claimTokenTtlS: 600 });
await markClaimed(db, registration.id);
const tenantId = registration.tenant_id;
const agentToken = await agentAccessToken(app, config, registration, ['svc:boards:read', 'svc:boards:publish']);
const admin = await createMember(db, 'admin');
const viewer = await createMember(db, 'viewer');
await db.query(
  sql.unsafe`insert into tenant_memberships (tenant_id, user_id, role) values (${tenantId}, ${admin.userId}, 'admin'), (${tenantId}, ${viewer.userId}, 'viewer')`,
);
const outsider = await createMember(db, 'admin');
const scopes = await createBoardScopes(db, tenantId);
const outsiderScopes = await createBoardScopes(db, outsider.tenantId);

const as = (m: { token: string }, tenant = tenantId) => ({ authorization: `Bearer ${m.token}`, 'x-tenant-id': tenant });
let keys = 0;
const agentPost = (url: string, payload: object) =>
  app.inject({
    method: 'POST',
    url,
    payload,
    headers: { authorization: `Bearer ${agentToken}`, 'idempotency-key': `platform-key-${++keys}` },
  });

t.test('people create boards and save versions; agents see them', async (t) => {
  const created = await app.inject({
    method: 'POST',
    url: '/api/boards',
    headers: as(admin),
    payload: { title: 'Ops <b>', scopeType: 'agent', scopeId: scopes.agentId, content: { a: 1 } },
  });
  t.equal(created.statusCode, 201);
  t.match(created.json(), { title: 'Ops <b>', scopeType: 'agent', scopeId: scopes.agentId, latestVersion: 1 });
  const id = created.json().id;
  const saved = await app.inject({
    method: 'PUT',
    url: `/api/boards/${id}/content`,
    headers: as(admin),
    payload: { content: [1, 2] },
  });
  t.equal(saved.statusCode, 200);
  t.equal(saved.json().latestVersion, 2);
  const seen = await app.inject({
    url: `/api/agent/v1/boards/${id}`,
    headers: { authorization: `Bearer ${agentToken}` },
  });
  t.match(seen.json(), { id, latest_version: 2, content: [1, 2] });
  t.equal(
    (
      await app.inject({
        method: 'POST',
        url: '/api/boards',
        headers: as(viewer),
        payload: { title: 'x', scopeType: 'company', scopeId: scopes.companyId },
      })
    ).statusCode,
    403,
    'Admin only',
  );
  t.equal(
    (
      await app.inject({
        method: 'PUT',
        url: `/api/boards/${id}/content`,
        headers: as(outsider, outsider.tenantId),
        payload: { content: {} },
      })
    ).statusCode,
    404,
    'other tenant',
  );
  t.equal(
    (
      await app.inject({
        method: 'POST',
        url: '/api/boards',
        headers: as(admin),
        payload: { title: 'x', scopeType: 'team', scopeId: scopes.companyId },
      })
    ).statusCode,
    400,
  );
});

t.test("another tenant's (or no) company or agent as the scope: 404 not_found, no row", async (t) => {
  const count = () => db.oneFirst(sql.unsafe`select count(*)::int from insight_boards where tenant_id = ${tenantId}`);
  const before = await count();
  for (const [scopeType, scopeId] of [
    ['company', outsiderScopes.companyId],
    ['agent', outsiderScopes.agentId],
    ['company', 'acme'],
    ['agent', scopes.companyId],
  ] as const) {
    const res = await app.inject({
      method: 'POST',
      url: '/api/boards',
      headers: as(admin),
      payload: { title: 'Theirs', scopeType, scopeId, content: { a: 1 } },
    });
    t.equal(res.statusCode, 404, `${scopeType} ${scopeId}`);
    t.match(res.json(), { error: 'not_found', status: 404 });
  }
  t.equal(await count(), before, 'nothing written');
});

t.test('approvals: the page a person opens, Admin-only decisions, tenant isolation', async (t) => {
  const id = (
    await app.inject({
      method: 'POST',
      url: '/api/boards',
      headers: as(admin),
      payload: {
        title: 'Sales',
        scopeType: 'company',
        scopeId: scopes.companyId,
        content: { n: '<script>alert(1)</script>' },
      },
    })
  ).json().id;
  const asked = (await agentPost(`/api/agent/v1/boards/${id}/publish`, { visibility: 'public' })).json();
  t.equal(asked.state, 'approval_required');
  t.equal(
    asked.approval.approve_url,
    `${config.baseUrl}/boards/approvals/${asked.approval.id}`,
    'a page for people (approval-page.test.ts)',
  );
  const approvalPath = `/api/boards/approvals/${asked.approval.id}`;
  const page = await app.inject({ url: approvalPath, headers: as(viewer) });
  t.equal(page.statusCode, 200);
  t.match(page.json(), { id: asked.approval.id, boardId: id, version: 1, visibility: 'public', state: 'pending' });
  t.equal((await app.inject({ url: approvalPath, headers: as(outsider, outsider.tenantId) })).statusCode, 404);
  t.equal(
    (await app.inject({ method: 'POST', url: `${approvalPath}/approve`, headers: as(viewer) })).statusCode,
    403,
    'a Viewer cannot decide',
  );
  t.equal(
    (await app.inject({ method: 'POST', url: `${approvalPath}/approve`, headers: as(outsider, outsider.tenantId) }))
      .statusCode,
    404,
  );
  t.equal(
    (await app.inject({ method: 'POST', url: '/api/boards/approvals/not-a-uuid/approve', headers: as(admin) }))
      .statusCode,
    404,
  );
  t.equal((await app.inject({ method: 'POST', url: `${approvalPath}/approve`, headers: as(admin) })).statusCode, 200);
  t.equal(
    (await app.inject({ method: 'POST', url: `${approvalPath}/deny`, headers: as(admin) })).statusCode,
    409,
    'decided once',
  );

  const published = (await agentPost(`/api/agent/v1/boards/${id}/publish`, { visibility: 'public' })).json();
  t.equal(published.state, 'published');
  const hostedPath = new URL(published.link.url).pathname;
  const html = await app.inject({ url: hostedPath });
  t.equal(html.statusCode, 200);
  t.match(html.headers['content-type'], /text\/html/);
  t.equal(html.headers['cache-control'], 'no-store');
  t.equal(html.headers['referrer-policy'], 'no-referrer');
  t.notMatch(html.body, '<script>', 'content is escaped');
  t.match(html.body, 'Sales');
  t.equal((await app.inject({ url: '/boards/public/bl_unknown' })).statusCode, 404);
  t.match(logs(), '/api/boards/approvals/', 'requests are logged at this level');
  t.notMatch(logs(), published.link.secret, 'the link secret is never logged');
});

t.test('openapi names the board operations and schemas', async (t) => {
  const doc = (await app.inject({ url: '/openapi.json' })).body;
  for (const name of [
    'listInsightBoards',
    'getInsightBoard',
    'getInsightBoardPublication',
    'publishInsightBoard',
    'unpublishInsightBoard',
    'rotateInsightBoardLink',
    'listInsightBoards.response.v1',
    'getInsightBoard.response.v1',
    'getInsightBoardPublication.response.v1',
    'publishInsightBoard.response.v1',
    'unpublishInsightBoard.response.v1',
    'rotateInsightBoardLink.response.v1',
    'publishInsightBoard.request.v1',
    'unpublishInsightBoard.request.v1',
    'rotateInsightBoardLink.request.v1',
    'approveBoardPublish',
    'denyBoardPublish',
  ])
    t.match(doc, `"${name}"`, name);
  t.notMatch(doc, '/boards/public/', 'the hosted page is not an API operation');
});
