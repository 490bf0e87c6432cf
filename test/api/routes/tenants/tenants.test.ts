// Tenants and the tenant context: membership, roles, isolation, secrets
// sealed at rest, sessions, jobs through the engine.
import t from 'tap';
import { z } from 'zod';
import { open } from '../../../../core/crypto/secretbox.ts';
import { sql } from '../../../../core/db/pool.ts';
import { startTestServer } from '../../../helpers/app.ts';
import { createTestDatabase, rowCount } from '../../../helpers/db.ts';
import { createMember } from '../../../helpers/fixtures.ts';
import { startTestWorker } from '../../../helpers/worker.ts';
import { waitFor } from '../../../helpers/wait.ts';
import { isJobMessage, TestSocket } from '../../../helpers/ws.ts';

const databaseUrl = await createTestDatabase(t);
const api = await startTestServer(t, databaseUrl);
const { app, db } = api;
const owner = await createMember(db, 'admin');
const viewer = await createMember(db, 'viewer');
await db.query(
  sql.unsafe`insert into tenant_memberships (tenant_id, user_id, role) values (${owner.tenantId}, ${viewer.userId}, 'viewer')`,
);
const outsider = await createMember(db, 'admin');
const as = (m: { token: string }, tenantId?: string) => ({
  authorization: `Bearer ${m.token}`,
  ...(tenantId ? { 'x-tenant-id': tenantId } : {}),
});
const count = (table: string) => rowCount(db, table);

t.test('create a tenant: creator is Admin, default settings returned', async (t) => {
  const res = await app.inject({ method: 'POST', url: '/api/tenants/', headers: as(owner), payload: { name: 'Acme' } });
  t.equal(res.statusCode, 201);
  const body = res.json();
  t.match(body, { name: 'Acme', settings: { timezone: 'UTC', locale: 'en', defaultModel: null } });
  const read = await app.inject({ url: `/api/tenants/${body.id}`, headers: as(owner) });
  t.equal(read.statusCode, 200);
  t.match(read.json(), { id: body.id, memberCount: 1, role: 'admin', plan: 'free' });
  const unnamed = await app.inject({ method: 'POST', url: '/api/tenants/', headers: as(owner), payload: {} });
  t.equal(unnamed.json().name, 'My workspace', 'the name has a default');
});

t.test('a tenant reads as missing to a non-member, exactly like a tenant that does not exist', async (t) => {
  const foreign = await app.inject({ url: `/api/tenants/${owner.tenantId}`, headers: as(outsider) });
  const missing = await app.inject({ url: `/api/tenants/0b7f2d8e-5b52-4d8f-9a1c-0c2f6f0f3b11`, headers: as(outsider) });
  t.equal(foreign.statusCode, 404);
  t.same(foreign.json(), missing.json());
  t.equal((await app.inject({ url: `/api/tenants/${owner.tenantId}`, headers: as(viewer) })).json().memberCount, 2);
});

const adminRoutes = [
  { url: '/api/tenants/secrets', payload: { name: 'stripe_key', value: 'sk_test_abcdef' } },
  { url: '/api/tenants/sessions', payload: { title: 'Planning' } },
];
// The owner of the tenant is the platform operator here (the full bounds of diagnostic jobs).
await db.query(sql.unsafe`update users set is_operator = true where id = ${owner.userId}`);

t.test('tenant routes: 401, 400 header, 404 for outsiders, 403 for viewers; nothing written', async (t) => {
  const before = await Promise.all(['tenant_secrets', 'chat_sessions', 'jobs'].map(count));
  for (const route of adminRoutes) {
    const post = (headers: Record<string, string>, payload: unknown = route.payload) =>
      app.inject({ method: 'POST', url: route.url, headers, payload: payload as object });
    t.equal((await post({})).statusCode, 401, `${route.url} without token`);
    const noHeader = await post(as(owner));
    t.equal(noHeader.statusCode, 400, `${route.url} without x-tenant-id`);
    t.match(noHeader.json(), { error: 'invalid_request', status: 400 });
    t.equal(
      (await post({ ...as(owner), 'x-tenant-id': 'not-a-uuid' })).statusCode,
      400,
      `${route.url} malformed header`,
    );
    const foreign = await post(as(outsider, owner.tenantId));
    t.equal(foreign.statusCode, 404, `${route.url} another tenant's member`);
    t.notMatch(foreign.body, new RegExp(owner.tenantId), 'echoes nothing of the tenant');
    const denied = await post(as(viewer, owner.tenantId));
    t.equal(denied.statusCode, 403, `${route.url} viewer on an Admin route`);
    t.match(denied.json(), { error: 'forbidden', status: 403 });
    t.equal(
      (await post(as(owner, owner.tenantId), { title: 5, name: 5, kind: 5 })).statusCode,
      400,
      `${route.url} malformed body`,
    );
  }
  t.same(
    await Promise.all(['tenant_secrets', 'chat_sessions', 'jobs'].map(count)),
    before,
    'no failed request wrote anything',
  );
});

t.test('secrets are sealed at rest, bound to their tenant, never returned', async (t) => {
  const res = await app.inject({
    method: 'POST',
    url: '/api/tenants/secrets',
    headers: as(owner, owner.tenantId),
    payload: { name: 'stripe_key', value: 'sk_test_SUPERSECRET' },
  });
  t.equal(res.statusCode, 201);
  t.match(res.json(), { name: 'stripe_key', replaced: false });
  t.notMatch(res.body, /SUPERSECRET/);
  const again = await app.inject({
    method: 'POST',
    url: '/api/tenants/secrets',
    headers: as(owner, owner.tenantId),
    payload: { name: 'stripe_key', value: 'sk_test_NEWER' },
  });
  t.match(again.json(), { replaced: true });
  const stored = await db.oneFirst(sql.type(z.object({ ciphertext: z.string() }))`
    select ciphertext from tenant_secrets where tenant_id = ${owner.tenantId} and name = 'stripe_key'`);
  t.notMatch(stored, /NEWER/, 'ciphertext at rest');
  t.equal(
    open(api.config.secrets.DATA_ENCRYPTION_KEY, stored, `tenant-secret:${owner.tenantId}:stripe_key`),
    'sk_test_NEWER',
  );
  t.throws(
    () => open(api.config.secrets.DATA_ENCRYPTION_KEY, stored, `tenant-secret:${outsider.tenantId}:stripe_key`),
    'useless under another tenant',
  );
});

t.test('sessions are created in the header tenant, never one from the body', async (t) => {
  const res = await app.inject({
    method: 'POST',
    url: '/api/tenants/sessions',
    headers: as(owner, owner.tenantId),
    payload: { title: 'Roadmap', tenantId: outsider.tenantId },
  });
  t.equal(res.statusCode, 201);
  const tenant = await db.oneFirst(
    sql.type(z.object({ tenant_id: z.string() }))`select tenant_id from chat_sessions where id = ${res.json().id}`,
  );
  t.equal(tenant, owner.tenantId);
});

t.test(
  'diagnostic jobs: a tenant Admin within small bounds, the operator with the full ones; Viewers and outsiders refused',
  async (t) => {
    const before = await count('jobs');
    const long = { kind: 'diag.steps', input: { steps: 100, delayMs: 60_000 } };
    const post = (headers: Record<string, string>, payload: object = long) =>
      app.inject({ method: 'POST', url: '/api/tenants/jobs', headers, payload });
    t.equal((await post({})).statusCode, 401);
    t.equal((await post(as(viewer, owner.tenantId))).statusCode, 403, 'a Viewer is refused');
    t.equal((await post(as(owner))).statusCode, 400, 'the tenant is named');
    t.equal(
      (await post(as(owner, outsider.tenantId))).statusCode,
      404,
      "the operator is no member of another customer's tenant",
    );
    for (const [input, field] of [
      [{ steps: 100, delayMs: 60_000 }, 'body.input.steps'],
      [{ steps: 3, delayMs: 5_000 }, 'body.input.delayMs'],
      [{ ignoreCancel: true }, 'body.input'],
      [{ failAttemptsBelow: 50 }, 'body.input.failAttemptsBelow'],
    ] as const) {
      const res = await post(as(outsider, outsider.tenantId), { kind: 'diag.steps', input });
      t.equal(res.statusCode, 400, JSON.stringify(input));
      t.match(res.json(), {
        error: 'invalid_request',
        message: new RegExp(`^Invalid request: ${field.replace(/\./g, '\\.')}.*the bounds of a tenant Admin`),
      });
    }
    const tooLongWait = await post(as(outsider, outsider.tenantId), { kind: 'diag.wait', input: { ms: 600_000 } });
    t.equal(tooLongWait.statusCode, 400);
    t.equal(await count('jobs'), before, 'nothing was enqueued');
    const big = await post(as(owner, owner.tenantId), { kind: 'diag.wait', input: { ms: 600_000 } });
    t.equal(big.statusCode, 202, "the operator has the task's own bounds");
    await app.inject({ method: 'POST', url: `/api/jobs/${big.json().id}/cancel`, headers: as(owner) });
  },
);

t.test("a tenant Admin's account has at most 5 unfinished diagnostic jobs, also when requests race", async (t) => {
  const person = await createMember(db, 'admin');
  // Two workspaces the person owns: one account.
  const [first_, second] = await Promise.all(
    ['First', 'Second'].map(
      async (name) =>
        (await app.inject({ method: 'POST', url: '/api/tenants/', headers: as(person), payload: { name } })).json()
          .id as string,
    ),
  );
  const start = (tenantId: string) =>
    app.inject({
      method: 'POST',
      url: '/api/tenants/jobs',
      headers: as(person, tenantId),
      payload: { kind: 'diag.wait', input: { ms: 10_000 } },
    });
  // Ten at once across the account's two workspaces: five pass, five are refused.
  const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => start(i % 2 ? second! : first_!)));
  t.same(answers.map((a) => a.statusCode).sort(), [202, 202, 202, 202, 202, 429, 429, 429, 429, 429]);
  const refused = answers.find((a) => a.statusCode === 429)!;
  t.match(refused.json(), {
    error: 'diag_job_limit',
    status: 429,
    message: /5 unfinished diagnostic jobs.*wait for one to finish/,
  });
  // Another account is not affected.
  const other = await app.inject({
    method: 'POST',
    url: '/api/tenants/jobs',
    headers: as(outsider, outsider.tenantId),
    payload: { kind: 'diag.noop' },
  });
  t.equal(other.statusCode, 202, other.body);
  // One cancelled: room for one more.
  const first = answers.find((a) => a.statusCode === 202)!.json().id as string;
  t.equal(
    (await app.inject({ method: 'POST', url: `/api/jobs/${first}/cancel`, headers: as(person) })).statusCode,
    200,
    'a tenant Admin cancels a queued job at once',
  );
  await waitFor('the cancel to finish the job', async () =>
    (await app.inject({ url: `/api/jobs/${first}`, headers: as(person) })).json().status === 'cancelled' ? true : null,
  );
  t.equal((await start(second!)).statusCode, 202);
});

t.test('a tenant job runs through the engine and is observable by poll and websocket', async (t) => {
  await startTestWorker(t, databaseUrl);
  const socket = await TestSocket.connect(api.wsUrl, owner.token);
  t.teardown(() => socket.close());
  const res = await app.inject({
    method: 'POST',
    url: '/api/tenants/jobs',
    headers: as(owner, owner.tenantId),
    payload: { kind: 'diag.steps', input: { steps: 2, delayMs: 20 } },
  });
  t.equal(res.statusCode, 202);
  const job = res.json();
  t.match(job, { kind: 'diag.steps', status: /^(queued|running)$/ }); // a worker may already have it
  t.equal(res.headers.location, `/api/jobs/${job.id}`);
  socket.send({ type: 'subscribe', jobId: job.id });
  let last: { status: string } | undefined;
  while (last?.status !== 'succeeded') last = (await socket.next(isJobMessage(job.id))).job as { status: string };
  const polled = await app.inject({ url: `/api/jobs/${job.id}`, headers: as(viewer) });
  t.same(polled.json(), last, 'a viewer of the tenant polls the same final state');
  t.equal((await app.inject({ url: `/api/jobs/${job.id}`, headers: as(outsider) })).statusCode, 404);
  const unknownKind = await app.inject({
    method: 'POST',
    url: '/api/tenants/jobs',
    headers: as(owner, owner.tenantId),
    payload: { kind: 'maintenance.sweep_expired' },
  });
  t.equal(unknownKind.statusCode, 400, 'only tenant job kinds');
});

t.test("GET /api/tenants/ lists the caller's tenants with their role, newest first, in keyset pages", async (t) => {
  const person = await createMember(db, 'admin');
  const created: string[] = [];
  for (const name of ['One', 'Two', 'Three']) {
    created.push(
      (await app.inject({ method: 'POST', url: '/api/tenants/', headers: as(person), payload: { name } })).json().id,
    );
  }
  // A viewer seat in someone else's workspace is listed too, not owned.
  await db.query(
    sql.unsafe`insert into tenant_memberships (tenant_id, user_id, role) values (${outsider.tenantId}, ${person.userId}, 'viewer')`,
  );
  const all = await app.inject({ url: '/api/tenants/', headers: as(person) });
  t.equal(all.statusCode, 200);
  const items = all.json().items as Array<{ id: string; name: string; role: string; owned: boolean; plan: string }>;
  t.equal(items.length, 5, 'the own workspace, three created, one joined');
  t.same(
    items.filter((i) => created.includes(i.id)).map((i) => i.name),
    ['Three', 'Two', 'One'],
    'newest first',
  );
  t.match(
    items.find((i) => i.id === outsider.tenantId),
    { role: 'viewer', owned: false, plan: 'free' },
  );
  t.match(
    items.find((i) => i.id === person.tenantId),
    { role: 'admin' },
  );
  t.notOk(
    items.some((i) => i.id === owner.tenantId),
    "another person's workspace is not listed",
  );

  const seen: string[] = [];
  let cursor: string | null = null;
  do {
    const page: { items: Array<{ id: string }>; nextCursor: string | null } = (
      await app.inject({
        url: `/api/tenants/?limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
        headers: as(person),
      })
    ).json();
    t.ok(page.items.length <= 2);
    seen.push(...page.items.map((i) => i.id));
    cursor = page.nextCursor;
  } while (cursor);
  t.same(
    seen,
    items.map((i) => i.id),
    'pages walk the same list once',
  );

  const bad = await app.inject({ url: '/api/tenants/?cursor=nonsense', headers: as(person) });
  t.equal(bad.statusCode, 400);
  t.match(bad.json(), { error: 'invalid_request', message: /cursor/ });
  t.equal((await app.inject({ url: '/api/tenants/?limit=0', headers: as(person) })).statusCode, 400);
  t.equal((await app.inject({ url: '/api/tenants/' })).statusCode, 401);
});
