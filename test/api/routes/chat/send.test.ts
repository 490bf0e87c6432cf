// POST /api/chat/send: 202 at once, Idempotency-Key semantics, quota, isolation.
import t from 'tap';
import { z } from 'zod';
import { sql } from '../../../../core/db/pool.ts';
import { buildTestApp } from '../../../helpers/app.ts';
import { createTestDatabase } from '../../../helpers/db.ts';
import { createMember } from '../../../helpers/fixtures.ts';

const databaseUrl = await createTestDatabase(t);
const { app, db } = await buildTestApp(t, databaseUrl);
const owner = await createMember(db, 'admin');
const viewer = await createMember(db, 'viewer');
await db.query(
  sql.unsafe`insert into tenant_memberships (tenant_id, user_id, role) values (${owner.tenantId}, ${viewer.userId}, 'viewer')`,
);
const outsider = await createMember(db, 'admin');
const viewerIn = { token: viewer.token, tenantId: owner.tenantId }; // the viewer acting in the owner's tenant
const headers = (m: { token: string; tenantId: string }, key?: string) => ({
  authorization: `Bearer ${m.token}`,
  'x-tenant-id': m.tenantId,
  ...(key ? { 'idempotency-key': key } : {}),
});
const sessionOf = async (m: { token: string; tenantId: string }) =>
  (
    await app.inject({ method: 'POST', url: '/api/chat/sessions', headers: headers(m), payload: { title: 'Test' } })
  ).json().id as string;
const counts = async () =>
  db.one(sql.type(z.object({ messages: z.number(), jobs: z.number(), graphile: z.number() }))`
    select (select count(*) from chat_messages)::int as messages, (select count(*) from jobs)::int as jobs,
      (select count(*) from graphile_worker.jobs where task_identifier = 'chat.turn')::int as graphile`);
const send = (m: { token: string; tenantId: string }, key: string | undefined, payload: object) =>
  app.inject({ method: 'POST', url: '/api/chat/send', headers: headers(m, key), payload });

const sessionId = await sessionOf(owner);

t.test('send returns 202 with the job and message at once; a retry replays it', async (t) => {
  const before = await counts();
  const first = await send(owner, 'key-00000001', { sessionId, message: 'Hello there' });
  t.equal(first.statusCode, 202);
  const body = first.json();
  t.match(body, { sessionId, status: 'queued', jobId: String, messageId: String });
  t.equal(first.headers.location, `/api/chat/jobs/${body.jobId}`);
  t.notOk(first.headers['idempotency-replayed']);
  t.same(await counts(), { messages: before.messages + 1, jobs: before.jobs + 1, graphile: before.graphile + 1 });

  const again = await send(owner, 'key-00000001', { sessionId, message: 'Hello there' });
  t.equal(again.statusCode, 202);
  t.same(again.json(), body, 'the original job and message identity');
  t.equal(again.headers['idempotency-replayed'], 'true');
  t.same(
    await counts(),
    { messages: before.messages + 1, jobs: before.jobs + 1, graphile: before.graphile + 1 },
    'nothing new',
  );

  const job = await app.inject({ url: `/api/chat/jobs/${body.jobId}`, headers: headers(viewerIn) });
  t.equal(job.statusCode, 200);
  t.match(job.json(), { id: body.jobId, kind: 'chat.turn' });
});

t.test('the same key with anything different is 409 IDEMPOTENCY_KEY_REUSED', async (t) => {
  const other = await sessionOf(owner);
  await send(owner, 'key-00000002', {
    sessionId,
    message: 'Original',
    companyScope: 'acme',
    attachments: [{ name: 'a.txt', mediaType: 'text/plain', text: 'x' }],
  });
  const before = await counts();
  for (const payload of [
    {
      sessionId: other,
      message: 'Original',
      companyScope: 'acme',
      attachments: [{ name: 'a.txt', mediaType: 'text/plain', text: 'x' }],
    },
    {
      sessionId,
      message: 'Changed',
      companyScope: 'acme',
      attachments: [{ name: 'a.txt', mediaType: 'text/plain', text: 'x' }],
    },
    {
      sessionId,
      message: 'Original',
      companyScope: 'other',
      attachments: [{ name: 'a.txt', mediaType: 'text/plain', text: 'x' }],
    },
    { sessionId, message: 'Original', companyScope: 'acme', attachments: [] },
  ]) {
    const res = await send(owner, 'key-00000002', payload);
    t.equal(res.statusCode, 409);
    t.match(res.json(), { error: 'IDEMPOTENCY_KEY_REUSED', status: 409 });
  }
  t.same(await counts(), before, 'nothing created');
});

t.test("a key is the caller's: another member sending the same key gets a send of their own", async (t) => {
  const colleague = await createMember(db, 'admin');
  await db.query(
    sql.unsafe`insert into tenant_memberships (tenant_id, user_id, role) values (${owner.tenantId}, ${colleague.userId}, 'admin')`,
  );
  const colleagueIn = { token: colleague.token, tenantId: owner.tenantId };
  const mine = await send(owner, 'key-shared-01', { sessionId, message: 'Same words' });
  t.equal(mine.statusCode, 202);
  const before = await counts();
  const theirs = await send(colleagueIn, 'key-shared-01', { sessionId, message: 'Same words' });
  t.equal(theirs.statusCode, 202);
  t.notOk(theirs.headers['idempotency-replayed'], "not a replay of the other member's send");
  t.not(theirs.json().jobId, mine.json().jobId);
  t.not(theirs.json().messageId, mine.json().messageId);
  const different = await send(colleagueIn, 'key-shared-02', { sessionId, message: 'Other words' });
  await send(owner, 'key-shared-02', { sessionId, message: 'Not the same' }).then((res) =>
    t.equal(res.statusCode, 202, "no 409 from a co-member's key"),
  );
  t.equal(different.statusCode, 202);
  const after = await counts();
  t.same([after.messages, after.jobs], [before.messages + 3, before.jobs + 3], 'three messages, three turns');
  const replay = await send(colleagueIn, 'key-shared-01', { sessionId, message: 'Same words' });
  t.equal(replay.headers['idempotency-replayed'], 'true', 'each member replays their own');
  t.same(replay.json(), theirs.json());
});

t.test('428 without a key, 400 for a malformed one, and nothing written', async (t) => {
  const before = await counts();
  const missing = await send(owner, undefined, { sessionId, message: 'Hi' });
  t.equal(missing.statusCode, 428);
  t.match(missing.json(), { error: 'IDEMPOTENCY_KEY_REQUIRED', status: 428 });
  for (const key of ['short', 'has space inside', 'x'.repeat(201), 'tab\tinside1', 'ünïcödé-key']) {
    const res = await app.inject({
      method: 'POST',
      url: '/api/chat/send',
      headers: { ...headers(owner), 'idempotency-key': encodeURIComponent(key) === key ? key : key },
      payload: { sessionId, message: 'Hi' },
    });
    t.equal(res.statusCode, 400, JSON.stringify(key));
    t.equal(res.json().status, 400);
  }
  t.equal((await send(owner, 'key-00000003', { sessionId, message: '' })).statusCode, 400, 'empty message');
  t.equal((await send(owner, 'key-00000003', { sessionId: 'nope', message: 'x' })).statusCode, 400, 'bad session id');
  t.same(await counts(), before);
});

t.test('two identical sends racing with one key create one message and one job', async (t) => {
  const before = await counts();
  const results = await Promise.all(
    Array.from({ length: 6 }, () => send(owner, 'race-key-0001', { sessionId, message: 'Race' })),
  );
  t.ok(
    results.every((r) => r.statusCode === 202),
    results.map((r) => r.statusCode).join(','),
  );
  t.equal(new Set(results.map((r) => r.json().jobId)).size, 1, 'one job id for all');
  t.equal(results.filter((r) => r.headers['idempotency-replayed'] === 'true').length, 5, 'five replays');
  t.same(
    await counts(),
    { messages: before.messages + 1, jobs: before.jobs + 1, graphile: before.graphile },
    'its session has its one wake-up already',
  );
});

t.test("another tenant's session or job is not found; viewers cannot send", async (t) => {
  const res = await send(outsider, 'key-00000004', { sessionId, message: 'Hi' });
  t.equal(res.statusCode, 404, 'a session of another tenant');
  const mine = (await send(owner, 'key-00000005', { sessionId, message: 'Mine' })).json();
  t.equal((await app.inject({ url: `/api/chat/jobs/${mine.jobId}`, headers: headers(outsider) })).statusCode, 404);
  t.equal(
    (await app.inject({ url: `/api/chat/messages?sessionId=${sessionId}`, headers: headers(outsider) })).statusCode,
    404,
  );
  t.equal((await send(viewerIn, 'key-00000006', { sessionId, message: 'Hi' })).statusCode, 403);
  t.equal(
    (
      await app.inject({
        method: 'POST',
        url: '/api/chat/send',
        headers: { 'idempotency-key': 'key-00000007' },
        payload: { sessionId, message: 'x' },
      })
    ).statusCode,
    401,
  );
});

t.test('over the plan message limit: 402 and nothing queued', async (t) => {
  const tenant = await createMember(db, 'admin');
  const session = await sessionOf(tenant);
  // The free plan allows 200 user messages a month.
  await db.query(sql.unsafe`
    insert into chat_messages (tenant_id, session_id, role, content)
    select ${tenant.tenantId}, ${session}, 'user', 'old' from generate_series(1, 200)`);
  const before = await counts();
  const res = await send(tenant, 'key-00000008', { sessionId: session, message: 'One more' });
  t.equal(res.statusCode, 402);
  t.match(res.json(), { error: 'MESSAGE_LIMIT_REACHED', status: 402 });
  t.same(await counts(), before, 'nothing queued');
  const retry = await send(tenant, 'key-00000008', { sessionId: session, message: 'One more' });
  t.equal(retry.statusCode, 402, 'the key was not spent by the refusal');
});

t.test('the quota is decided in the batch: sends of one batch count in order, replays spend nothing', async (t) => {
  const tenant = await createMember(db, 'admin');
  const session = await sessionOf(tenant);
  await db.query(sql.unsafe`
    insert into chat_messages (tenant_id, session_id, role, content)
    select ${tenant.tenantId}, ${session}, 'user', 'old' from generate_series(1, 197)`);
  const first = await send(tenant, 'quota-key-1', { sessionId: session, message: 'first' });
  t.equal(first.statusCode, 202, '198 of 200');
  // Sent together, these land in one batch of the group committer (or a few):
  // the replay spends nothing, so exactly two of the four new ones fit.
  const results = await Promise.all([
    send(tenant, 'quota-key-1', { sessionId: session, message: 'first' }),
    ...[2, 3, 4, 5].map((n) => send(tenant, `quota-key-${n}`, { sessionId: session, message: `new ${n}` })),
  ]);
  t.equal(results[0]!.statusCode, 202);
  t.equal(results[0]!.headers['idempotency-replayed'], 'true');
  const fresh = results
    .slice(1)
    .map((r) => r.statusCode)
    .sort();
  t.same(fresh, [202, 202, 402, 402], 'two fit, two are refused');
  const used = await db.oneFirst(sql.type(z.object({ messages: z.number() }))`
    select messages from tenant_message_counts where tenant_id = ${tenant.tenantId}`);
  t.equal(used, 200, 'the counter stops at the limit');
  // Over the limit, a replay of an accepted send still answers.
  const replay = await send(tenant, 'quota-key-1', { sessionId: session, message: 'first' });
  t.equal(replay.statusCode, 202);
});

t.test('messages list oldest to newest with a cursor; sessions list pages', async (t) => {
  const session = await sessionOf(owner);
  for (let i = 1; i <= 3; i++) await send(owner, `list-key-000${i}`, { sessionId: session, message: `m${i}` });
  const first = (
    await app.inject({ url: `/api/chat/messages?sessionId=${session}&limit=2`, headers: headers(viewerIn) })
  ).json();
  t.same(
    first.items.map((m: { content: string }) => m.content),
    ['m1', 'm2'],
  );
  const second = (
    await app.inject({
      url: `/api/chat/messages?sessionId=${session}&limit=2&cursor=${first.nextCursor}`,
      headers: headers(viewerIn),
    })
  ).json();
  t.same(
    second.items.map((m: { content: string }) => m.content),
    ['m3'],
  );
  t.equal(second.nextCursor, null);
  t.equal(
    (await app.inject({ url: `/api/chat/messages?sessionId=${session}&cursor=zzz`, headers: headers(viewerIn) }))
      .statusCode,
    400,
  );
  const sessions = (await app.inject({ url: '/api/chat/sessions?limit=1', headers: headers(viewerIn) })).json();
  t.equal(sessions.items.length, 1);
  t.type(sessions.nextCursor, 'string');
});

t.test('chat init provisions once', async (t) => {
  const fresh = await createMember(db, 'admin');
  await db.query(sql.unsafe`delete from tenant_memberships where user_id = ${fresh.userId}`);
  const auth = { authorization: `Bearer ${fresh.token}` };
  const [a, b] = await Promise.all([
    app.inject({ method: 'POST', url: '/api/chat/init', headers: auth }),
    app.inject({ method: 'POST', url: '/api/chat/init', headers: auth }),
  ]);
  t.equal(a.statusCode, 200);
  t.same({ ...a.json(), created: true }, { ...b.json(), created: true }, 'same tenant, agent and session');
  const third = (await app.inject({ method: 'POST', url: '/api/chat/init', headers: auth })).json();
  t.equal(third.created, false);
  t.equal(third.sessionId, a.json().sessionId);
});
