// What one account may hold, by plan (plan_limits, migration 0037): its
// unfinished jobs across all its workspaces, and the workspaces it creates.
// A refusal names the limit with a code and writes nothing.
import t from 'tap';
import { z } from 'zod';
import { sql } from '../../../core/db/pool.ts';
import { buildTestApp } from '../../helpers/app.ts';
import { createTestDatabase } from '../../helpers/db.ts';
import { createAccount } from '../../helpers/fixtures.ts';

const databaseUrl = await createTestDatabase(t);
// No worker runs here: whatever is enqueued stays unfinished.
const { app, db } = await buildTestApp(t, databaseUrl, {
  PLAN_MAX_OPEN_JOBS: 'free=3',
  PLAN_MAX_WORKSPACES: 'free=2,pro=4',
});

const counts = (tenants: readonly string[]) =>
  db.one(sql.type(z.object({ jobs: z.number(), messages: z.number(), graphile: z.number() }))`
  select (select count(*) from jobs where tenant_id = any(${sql.array(tenants, 'uuid')}))::int as jobs,
    (select count(*) from chat_messages where tenant_id = any(${sql.array(tenants, 'uuid')}))::int as messages,
    (select count(*) from graphile_worker.jobs g where g.key in (select 'q:' || j.queue_name from jobs j where j.tenant_id = any(${sql.array(tenants, 'uuid')}))
      or g.id in (select j.graphile_job_id from jobs j where j.tenant_id = any(${sql.array(tenants, 'uuid')})))::int as graphile`);

t.test("the process's configured limits are written at start", async (t) => {
  const rows = await db.any(sql.type(
    z.object({ plan: z.string(), max_open_jobs: z.number(), max_workspaces: z.number() }),
  )`
    select plan, max_open_jobs, max_workspaces from plan_limits order by plan`);
  t.match(rows, [
    { plan: 'enterprise', max_open_jobs: 50_000 },
    { plan: 'free', max_open_jobs: 3, max_workspaces: 2 },
    { plan: 'pro', max_workspaces: 4 },
  ]);
});

t.test(
  "an account's unfinished jobs count across its workspaces; over the limit a send is refused with 429 and nothing is written",
  async (t) => {
    const account = await createAccount(db, 2);
    const [a, b] = account.tenants as [string, string];
    const headers = (tenantId: string) => ({ authorization: `Bearer ${account.token}`, 'x-tenant-id': tenantId });
    const session = async (tenantId: string) =>
      (
        await app.inject({
          method: 'POST',
          url: '/api/chat/sessions',
          headers: headers(tenantId),
          payload: { title: 'Q' },
        })
      ).json().id as string;
    const [sa, sb] = [await session(a), await session(b)];
    let n = 0;
    const send = (tenantId: string, sessionId: string) =>
      app.inject({
        method: 'POST',
        url: '/api/chat/send',
        headers: { ...headers(tenantId), 'idempotency-key': `quota-key-${++n}` },
        payload: { sessionId, message: `message ${n}` },
      });
    t.same(
      [(await send(a, sa)).statusCode, (await send(a, sa)).statusCode, (await send(b, sb)).statusCode],
      [202, 202, 202],
      'three unfinished turns in two workspaces',
    );
    const before = await counts(account.tenants);
    const refused = await send(b, sb);
    t.equal(refused.statusCode, 429);
    t.match(refused.json(), { error: 'QUEUE_LIMIT_REACHED', status: 429, message: /3 unfinished jobs.*free plan/ });
    t.ok(Number(refused.headers['retry-after']) > 0, 'with Retry-After');
    t.same(await counts(account.tenants), before, 'no message, no job, no Graphile job');

    // Another account is not affected.
    const other = await createAccount(db, 1);
    const os = (
      await app.inject({
        method: 'POST',
        url: '/api/chat/sessions',
        headers: { authorization: `Bearer ${other.token}`, 'x-tenant-id': other.tenants[0]! },
        payload: {},
      })
    ).json().id;
    const theirs = await app.inject({
      method: 'POST',
      url: '/api/chat/send',
      headers: {
        authorization: `Bearer ${other.token}`,
        'x-tenant-id': other.tenants[0]!,
        'idempotency-key': 'quota-other-1',
      },
      payload: { sessionId: os, message: 'hi' },
    });
    t.equal(theirs.statusCode, 202, "another account's send");

    // A finished (here: cancelled) job makes room again.
    const [jobId] = await db.anyFirst(
      sql.type(z.object({ id: z.string() }))`select id from jobs where tenant_id = ${a} order by created_at limit 1`,
    );
    t.equal(
      (await app.inject({ method: 'POST', url: `/api/jobs/${jobId}/cancel`, headers: headers(a) })).statusCode,
      200,
    );
    t.equal((await send(b, sb)).statusCode, 202, 'room again once one finished');
    const open = await db.oneFirst(
      sql.type(z.object({ open: z.number() }))`select account_open_count(${account.userId}) as open`,
    );
    t.equal(open, 3, 'the counter follows: three unfinished');
  },
);

t.test('the counter stays exact: concurrent sends never pass the limit together', async (t) => {
  const account = await createAccount(db, 1);
  const headers = { authorization: `Bearer ${account.token}`, 'x-tenant-id': account.tenants[0]! };
  const sessionId = (await app.inject({ method: 'POST', url: '/api/chat/sessions', headers, payload: {} })).json().id;
  const results = await Promise.all(
    Array.from({ length: 12 }, (_, i) =>
      app.inject({
        method: 'POST',
        url: '/api/chat/send',
        headers: { ...headers, 'idempotency-key': `quota-race-${i}` },
        payload: { sessionId, message: `m${i}` },
      }),
    ),
  );
  const statuses = results.map((r) => r.statusCode).sort();
  t.same(statuses, [...Array(3).fill(202), ...Array(9).fill(429)], 'three accepted, nine refused');
  t.equal((await counts(account.tenants)).jobs, 3);
});

t.test('workspaces: an account creates as many as its best plan allows; the refusal writes nothing', async (t) => {
  const person = await createAccount(db, 0);
  const headers = { authorization: `Bearer ${person.token}` };
  const create = (name: string) => app.inject({ method: 'POST', url: '/api/tenants/', headers, payload: { name } });
  t.same([(await create('One')).statusCode, (await create('Two')).statusCode], [201, 201]);
  const owned = () =>
    db.oneFirst(
      sql.type(z.object({ n: z.number() }))`select count(*)::int as n from tenants where owner_id = ${person.userId}`,
    );
  const refused = await create('Three');
  t.equal(refused.statusCode, 409);
  t.match(refused.json(), { error: 'tenant_limit_reached', message: /created 2 workspaces.*free plan/ });
  t.equal(await owned(), 2, 'nothing written');
  await db.query(sql.unsafe`update tenants set plan = 'pro' where owner_id = ${person.userId} and name = 'One'`);
  t.equal((await create('Three')).statusCode, 201, 'a Pro workspace lifts the limit of the whole account');
});
