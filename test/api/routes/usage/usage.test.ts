// Usage routes: ingest, the paged list, reports that agree with the raw
// records before and after a rollup, budgets, cron runs, roles and tenants.
import { randomUUID } from 'node:crypto';
import t from 'tap';
import { z } from 'zod';
import { signPlatformToken } from '../../../../core/auth/platform-token.ts';
import { sql, type DatabasePool } from '../../../../core/db/pool.ts';
import { rollup } from '../../../../core/usage/rollup.ts';
import { buildTestApp } from '../../../helpers/app.ts';
import { TEST_SECRET } from '../../../helpers/config.ts';
import { createTestDatabase } from '../../../helpers/db.ts';
import { createMember, type Member } from '../../../helpers/fixtures.ts';

const databaseUrl = await createTestDatabase(t);
const { app, db } = await buildTestApp(t, databaseUrl);
const admin = await createMember(db, 'admin');
const other = await createMember(db, 'admin');
const viewer = await joinAsViewer(db, admin.tenantId);
const agentId = randomUUID();
await db.query(
  sql.unsafe`insert into agents (id, tenant_id, name, model) values (${agentId}, ${admin.tenantId}, 'Helper', 'openai/gpt-4o')`,
);

async function joinAsViewer(pool: DatabasePool, tenantId: string): Promise<Member> {
  const userId = randomUUID();
  await pool.query(sql.unsafe`insert into users (id, email) values (${userId}, ${`${userId}@example.test`})`);
  await pool.query(
    sql.unsafe`insert into tenant_memberships (tenant_id, user_id, role) values (${tenantId}, ${userId}, 'viewer')`,
  );
  const token = await signPlatformToken({ userId }, Buffer.from(TEST_SECRET, 'base64'), 'http://localhost:3000');
  return { tenantId, userId, token };
}

const as = (m: Member, tenantId = m.tenantId) => ({ authorization: `Bearer ${m.token}`, 'x-tenant-id': tenantId });
const get = (m: Member, url: string, tenantId?: string) => app.inject({ url, headers: as(m, tenantId) });
const ingest = (m: Member, payload: unknown, extra: Record<string, string> = {}) =>
  app.inject({ method: 'POST', url: '/api/usage/ingest', headers: { ...as(m), ...extra }, payload: payload as object });
const record = (i: number) => ({
  model: `openai/gpt-${i % 2 ? 'a' : 'b'}`,
  inputTokens: 100 * i,
  outputTokens: 10 * i,
  costMicros: 1000 * i,
});

const Sums = z.object({ cost: z.number(), input: z.number(), output: z.number(), records: z.number() });
/** The truth: the raw records of a tenant over [from, to] (UTC days). */
const rawTotals = (tenantId: string, from: string, to: string) =>
  db.one(sql.type(Sums)`
    select coalesce(sum(cost_micros), 0)::float8 as cost, coalesce(sum(input_tokens), 0)::float8 as input,
      coalesce(sum(output_tokens), 0)::float8 as output, count(*)::float8 as records
    from usage_records where tenant_id = ${tenantId}
      and occurred_at >= (${from}::date::timestamp at time zone 'UTC') and occurred_at < ((${to}::date + 1)::timestamp at time zone 'UTC')`);
const insertRaw = (
  tenantId: string,
  ago: string,
  cost: number,
  model = 'anthropic/claude',
  agent: string | null = null,
) =>
  db.query(sql.unsafe`
    insert into usage_records (tenant_id, agent_id, provider, model, input_tokens, output_tokens, cost_micros, credential, occurred_at)
    values (${tenantId}, ${agent}, split_part(${model}, '/', 1), ${model}, ${cost * 2}, ${cost}, ${cost}, 'platform_credits', now() - ${ago}::interval)`);

t.test('ingest: validated, written once per key, Admin only, in the caller tenant only', async (t) => {
  const bad: unknown[] = [
    {},
    { ...record(1), model: '' },
    { ...record(1), model: 'm'.repeat(201) },
    { ...record(1), inputTokens: -1 },
    { ...record(1), outputTokens: 1_000_000_001 },
    { ...record(1), inputTokens: 1.5 },
    { ...record(1), agentId: 'nope' },
    { ...record(1), occurredAt: 'yesterday' },
    { ...record(1), occurredAt: new Date(Date.now() - 400 * 86_400_000).toISOString() },
    { ...record(1), occurredAt: new Date(Date.now() + 3_600_000).toISOString() },
  ];
  for (const payload of bad) {
    const res = await ingest(admin, payload);
    t.equal(res.statusCode, 400, JSON.stringify(payload).slice(0, 80));
    t.match(res.json(), { error: 'invalid_request', status: 400 });
  }
  t.match((await ingest(admin, { ...record(1), agentId: randomUUID() })).json(), {
    error: 'unknown_agent',
    status: 400,
  });
  t.match((await ingest(admin, record(1), { 'idempotency-key': 'short' })).json(), {
    error: 'invalid_idempotency_key',
    status: 400,
  });
  t.equal((await ingest(viewer, record(1))).statusCode, 403);
  t.equal((await app.inject({ method: 'POST', url: '/api/usage/ingest', payload: record(1) })).statusCode, 401);
  const elsewhere = await app.inject({
    method: 'POST',
    url: '/api/usage/ingest',
    headers: as(admin, other.tenantId),
    payload: record(1),
  });
  t.equal(elsewhere.statusCode, 404, "another tenant's id reads like a missing tenant");

  const first = await ingest(admin, { ...record(3), agentId }, { 'idempotency-key': 'ingest-key-0001' });
  t.equal(first.statusCode, 201);
  t.match(first.json(), {
    model: 'openai/gpt-a',
    provider: 'openai',
    agentId,
    inputTokens: 300,
    costMicros: 3000,
    credential: 'external',
  });
  const again = await ingest(admin, { ...record(3), agentId }, { 'idempotency-key': 'ingest-key-0001' });
  t.equal(again.statusCode, 200);
  t.equal(again.headers['idempotency-replayed'], 'true');
  t.equal(again.json().id, first.json().id);
  const changed = await ingest(admin, record(4), { 'idempotency-key': 'ingest-key-0001' });
  t.match(changed.json(), { error: 'idempotency_conflict', status: 409 });
  const n = await db.oneFirst(
    sql.type(
      z.object({ n: z.number() }),
    )`select count(*)::int as n from usage_records where ingest_key = 'ingest-key-0001'`,
  );
  t.equal(n, 1, 'one record for the key');
});

t.test('reports agree with each other and with the raw records, before and after rollups', async (t) => {
  for (const ago of ['1 minute', '2 hours', '1 day', '3 days', '9 days', '20 days', '33 days', '45 days']) {
    await insertRaw(admin.tenantId, ago, 700);
  }
  await insertRaw(admin.tenantId, '2 days', 900, 'openai/gpt-a', agentId);
  for (let i = 1; i <= 4; i++) t.equal((await ingest(admin, record(i))).statusCode, 201);
  await insertRaw(other.tenantId, '1 minute', 123_456);

  const check = async (label: string) => {
    for (const period of ['day', 'week', 'month']) {
      const summary = (await get(admin, `/api/usage/summary?period=${period}`)).json();
      const raw = await rawTotals(admin.tenantId, summary.from, summary.to);
      t.same(
        {
          cost: summary.totals.costMicros,
          input: summary.totals.inputTokens,
          output: summary.totals.outputTokens,
          records: summary.totals.records,
        },
        raw,
        `${label}: ${period} summary equals the raw records`,
      );
      t.equal(summary.totals.totalTokens, raw.input + raw.output);
      const spending = (await get(admin, `/api/usage/spending?period=${period}`)).json();
      t.equal(spending.totalCostMicros, raw.cost, `${label}: ${period} spending total`);
      t.equal(
        spending.days.reduce((n: number, d: { costMicros: number }) => n + d.costMicros, 0),
        raw.cost,
      );
      t.equal(spending.days[0].day, summary.from);
      t.equal(spending.days.at(-1).day, summary.to);
    }
    const month = (await get(admin, '/api/usage/summary')).json();
    t.equal(month.period, 'month', 'month is the default period');
    const budget = (await get(viewer, '/api/usage/budget')).json();
    t.match(budget, {
      plan: 'free',
      source: 'plan',
      limitMicros: 5_000_000,
      usedMicros: month.totals.costMicros,
      periodStart: month.from,
      periodEnd: month.to,
    });
    t.equal(budget.remainingMicros, Math.max(0, budget.limitMicros - budget.usedMicros));

    const analytics = (await get(viewer, `/api/usage/analytics?from=${day(-60)}&to=${day(0)}`)).json();
    const raw = await rawTotals(admin.tenantId, day(-60), day(0));
    t.equal(analytics.totals.costMicros, raw.cost, `${label}: analytics totals`);
    t.equal(analytics.totals.records, raw.records);
    const sum = (groups: Array<{ costMicros: number }>) => groups.reduce((n, g) => n + g.costMicros, 0);
    t.equal(sum(analytics.byModel), raw.cost, 'by model adds up');
    t.equal(sum(analytics.byAgent), raw.cost, 'by agent adds up');
    t.match(
      analytics.byAgent.find((g: { agentId: string | null }) => g.agentId === agentId),
      { agentName: 'Helper', costMicros: 900 + 3000 },
    );
    t.ok(analytics.byAgent.some((g: { agentId: string | null }) => g.agentId === null));
    t.match(
      analytics.byModel.find((g: { model: string }) => g.model === 'openai/gpt-a'),
      { provider: 'openai', costMicros: 900 + 3000 + 1000 + 3000 },
    );
  };
  const today = z.object({ d: z.string() });
  const base = await db.oneFirst(sql.type(today)`select usage_day(now())::text as d`);
  const day = (offset: number) => new Date(Date.parse(base) + offset * 86_400_000).toISOString().slice(0, 10);

  await check('before any rollup');
  await rollup(db);
  await check('after the rollup');
  await insertRaw(admin.tenantId, '5 days', 333);
  await check('a back-dated record after the rollup');
  await rollup(db);
  await rollup(db);
  await check('after two more rollups');

  const theirs = (await get(other, '/api/usage/summary?period=day')).json();
  t.equal(theirs.totals.costMicros, 123_456, 'the other tenant sees only its own usage');
  t.equal((await get(admin, '/api/usage/summary', other.tenantId)).statusCode, 404);
});

t.test('the list pages newest first without gaps or repeats while records arrive', async (t) => {
  const fresh = await createMember(db, 'admin');
  // Same millisecond, different microseconds, and exact ties: the cursor must keep them all.
  const times = [
    '2025-01-10T12:00:00.123456Z',
    '2025-01-10T12:00:00.123789Z',
    '2025-01-10T12:00:00.123100Z',
    '2025-01-10T12:00:00.5Z',
  ];
  for (const [i, at] of times.entries()) {
    for (let k = 0; k < 2; k++) {
      await db.query(sql.unsafe`
        insert into usage_records (tenant_id, provider, model, input_tokens, output_tokens, cost_micros, occurred_at)
        values (${fresh.tenantId}, 'openai', ${`openai/m${i}`}, 1, 1, 1, ${at}::timestamptz)`);
    }
  }
  const before = await db.anyFirst(sql.type(z.object({ id: z.string() }))`
    select id from usage_records where tenant_id = ${fresh.tenantId} order by occurred_at desc, id desc`);
  const known = new Set(before);
  const pages: string[][] = [];
  let cursor: string | null = null;
  do {
    const url: string = `/api/usage/query?limit=3${cursor ? `&cursor=${cursor}` : ''}`;
    // Records arrive while the client pages: newer than any cursor, they can only show on the first page.
    const [page] = await Promise.all([get(fresh, url), ingest(fresh, record(1)), ingest(fresh, record(2))]);
    t.equal(page.statusCode, 200);
    const body = page.json();
    pages.push(body.items.map((r: { id: string }) => r.id));
    cursor = body.nextCursor;
  } while (cursor);
  const seen = pages.flat();
  t.equal(new Set(seen).size, seen.length, 'no record twice');
  t.same(
    seen.filter((id) => known.has(id)),
    before,
    'every earlier record, in order',
  );
  t.ok(
    pages
      .slice(1)
      .flat()
      .every((id) => known.has(id)),
    'new records never appear on later pages',
  );

  const filtered = (
    await get(fresh, '/api/usage/query?model=openai/m1&from=2025-01-10T00:00:00Z&to=2025-01-11T00:00:00%2B00:00')
  ).json();
  t.equal(filtered.items.length, 2);
  t.equal(filtered.nextCursor, null);
  const bad = [
    'limit=0',
    'limit=101',
    'cursor=garbage',
    'agentId=x',
    'from=2025-02-01T00:00:00Z&to=2025-01-01T00:00:00Z',
    'from=2023-01-01T00:00:00Z&to=2025-01-01T00:00:00Z',
    'from=today',
    `model=${'m'.repeat(201)}`,
  ];
  for (const q of bad) {
    const res = await get(fresh, `/api/usage/query?${q}`);
    t.equal(res.statusCode, 400, q);
    t.match(res.json(), { status: 400, error: String });
  }
  for (const q of ['period=year', 'period=']) t.equal((await get(fresh, `/api/usage/summary?${q}`)).statusCode, 400, q);
  for (const q of ['from=2025-13-01', 'from=2024-01-01&to=2025-06-01', 'from=2025-02-01&to=2025-01-01']) {
    t.equal((await get(fresh, `/api/usage/analytics?${q}`)).statusCode, 400, q);
  }
});

t.test('budget: plan default, own limit (Admin), snapshots', async (t) => {
  const put = (m: Member, payload: unknown) =>
    app.inject({ method: 'PUT', url: '/api/usage/budget', headers: as(m), payload: payload as object });
  t.equal((await put(viewer, { monthlyLimitMicros: 10 })).statusCode, 403);
  for (const payload of [{}, { monthlyLimitMicros: -1 }, { monthlyLimitMicros: 1.5 }, { monthlyLimitMicros: '5' }]) {
    t.equal((await put(admin, payload)).statusCode, 400, JSON.stringify(payload));
  }
  const used = (await get(admin, '/api/usage/budget')).json().usedMicros;
  t.ok(used > 0);
  t.match((await put(admin, { monthlyLimitMicros: 1000 })).json(), {
    source: 'tenant',
    limitMicros: 1000,
    usedMicros: used,
    remainingMicros: 0,
  });
  t.match((await put(admin, { monthlyLimitMicros: used + 50 })).json(), { remainingMicros: 50 });

  t.equal(
    (await app.inject({ method: 'POST', url: '/api/usage/budget-snapshot', headers: as(viewer) })).statusCode,
    403,
  );
  const snap = await app.inject({ method: 'POST', url: '/api/usage/budget-snapshot', headers: as(admin) });
  t.equal(snap.statusCode, 201);
  t.match(snap.json(), {
    limitMicros: used + 50,
    usedMicros: used,
    remainingMicros: 50,
    source: 'tenant',
    id: String,
    takenAt: String,
  });
  const stored = await db.one(sql.type(
    z.object({ limit_micros: z.union([z.bigint(), z.number()]), limit_source: z.string() }),
  )`
    select limit_micros, limit_source from budget_snapshots where id = ${snap.json().id} and tenant_id = ${admin.tenantId}`);
  t.equal(Number(stored.limit_micros), used + 50);
  t.match((await put(admin, { monthlyLimitMicros: null })).json(), { source: 'plan', limitMicros: 5_000_000 });
});

t.test('cron runs: recorded by Admin with a duration; bounds checked', async (t) => {
  const post = (m: Member, payload: unknown) =>
    app.inject({ method: 'POST', url: '/api/usage/cron-runs', headers: as(m), payload: payload as object });
  const now = Date.now(); // one clock reading: two could straddle a millisecond
  const startedAt = new Date(now - 60_000).toISOString();
  const finishedAt = new Date(now - 58_500).toISOString();
  const res = await post(admin, {
    name: 'nightly-report',
    status: 'succeeded',
    startedAt,
    finishedAt,
    detail: { rows: 12 },
  });
  t.equal(res.statusCode, 201);
  t.match(res.json(), {
    name: 'nightly-report',
    status: 'succeeded',
    durationMs: 1500,
    detail: { rows: 12 },
    finishedAt: String,
  });
  t.match((await post(admin, { name: 'poll', status: 'running', startedAt })).json(), {
    durationMs: null,
    finishedAt: null,
    detail: {},
  });
  t.equal((await post(viewer, { name: 'x', status: 'succeeded', startedAt })).statusCode, 403);
  const bad = [
    { name: 'x', status: 'done', startedAt },
    { name: '', status: 'failed', startedAt },
    { name: 'x', status: 'failed', startedAt, finishedAt: new Date(Date.now() - 120_000).toISOString() },
    { name: 'x', status: 'failed', startedAt, detail: { big: 'x'.repeat(17_000) } },
    { name: 'x', status: 'failed', startedAt: '2001-01-01T00:00:00Z' },
    { name: 'x', status: 'failed', startedAt, durationMs: -5 },
  ];
  for (const payload of bad)
    t.match(
      (await post(admin, payload)).json(),
      { error: 'invalid_request', status: 400 },
      JSON.stringify(payload).slice(0, 80),
    );
  const n = await db.oneFirst(
    sql.type(
      z.object({ n: z.number() }),
    )`select count(*)::int as n from external_cron_runs where tenant_id = ${admin.tenantId}`,
  );
  t.equal(n, 2);
});

t.test('the routes are in the OpenAPI description with their operation ids', async (t) => {
  const doc = (await app.inject({ url: '/openapi.json' })).json();
  t.equal(doc.paths['/api/usage/query'].get.operationId, 'queryUsage');
  t.equal(doc.paths['/api/usage/budget'].put.operationId, 'setUsageBudget');
  t.equal(doc.paths['/api/billing/status'].get.operationId, 'getBillingStatus');
  const params = doc.paths['/api/usage/query'].get.parameters.map((p: { name: string }) => p.name);
  for (const name of ['x-tenant-id', 'limit', 'cursor', 'from', 'to', 'model', 'agentId'])
    t.ok(params.includes(name), name);
  t.same(doc.paths['/api/usage/ingest'].post.tags, ['usage']);
});

t.test('ingest stops at the monthly ceiling: 422, nothing stored, every total stays exact', async (t) => {
  const m = await createMember(db, 'admin');
  const big = { model: 'openai/gpt-big', inputTokens: 1, outputTokens: 1, costMicros: 1_000_000_000_000 };
  for (let i = 0; i < 10; i++)
    t.equal((await ingest(m, big)).statusCode, 201, `record ${i + 1} of 10 at the per-record maximum`);
  const over = await ingest(m, big, { 'idempotency-key': 'one-too-many' });
  t.equal(over.statusCode, 422);
  t.match(over.json(), { error: 'usage_ceiling_exceeded', status: 422, message: /10,000,000 USD/ });
  const stored = await db.oneFirst(
    sql.type(z.object({ n: z.number() }))`select count(*)::int as n from usage_records where tenant_id = ${m.tenantId}`,
  );
  t.equal(stored, 10, 'the refused record was not stored');
  t.equal(
    (await ingest(m, { ...big, costMicros: 0, inputTokens: 5 })).statusCode,
    201,
    'a record within the ceiling still goes in',
  );
  for (const url of ['/api/usage/summary?period=month', '/api/usage/budget']) {
    t.equal((await get(m, url)).statusCode, 200, url);
  }
  // Another month has its own ceiling.
  const lastMonth = new Date(Date.now() - 32 * 86_400_000).toISOString();
  t.equal((await ingest(m, { ...big, occurredAt: lastMonth })).statusCode, 201);
});

t.test(
  'analytics and spending share the tracking limit: 30 per minute per client, then 429 with Retry-After',
  async (t) => {
    const m = await createMember(db, 'admin');
    const from = (ip: string, url: string) => app.inject({ url, remoteAddress: ip, headers: as(m) });
    for (let i = 0; i < 30; i++) {
      const res = await from('10.77.0.1', i % 2 ? '/api/usage/analytics' : '/api/usage/spending?period=month');
      if (res.statusCode !== 200) t.fail(`request ${i + 1}: ${res.statusCode} ${res.body}`);
    }
    const limited = await from('10.77.0.1', '/api/usage/analytics');
    t.equal(limited.statusCode, 429);
    t.match(limited.json(), { error: 'rate_limited', status: 429 });
    t.ok(Number(limited.headers['retry-after']) >= 1);
    t.equal((await from('10.77.0.2', '/api/usage/analytics')).statusCode, 200, 'another client is not limited');
    t.equal(
      (await from('10.77.0.1', '/api/usage/summary?period=month')).statusCode,
      200,
      'summary is not an analytics route',
    );
  },
);

t.test(
  '"Auth": a platform JWT alone reads the caller\'s workspace; several tenants without an own one must name it',
  async (t) => {
    const m = await createMember(db, 'admin');
    t.equal((await ingest(m, record(2))).statusCode, 201);
    const alone = await app.inject({
      url: '/api/usage/summary?period=month',
      headers: { authorization: `Bearer ${m.token}` },
    });
    t.equal(alone.statusCode, 200);
    t.equal(alone.json().totals.records, 1, "the record of the caller's only tenant");
    const both = await joinAsViewer(db, m.tenantId);
    await db.query(
      sql.unsafe`insert into tenant_memberships (tenant_id, user_id, role) values (${other.tenantId}, ${both.userId}, 'viewer')`,
    );
    const ambiguous = await app.inject({
      url: '/api/usage/summary?period=month',
      headers: { authorization: `Bearer ${both.token}` },
    });
    t.equal(ambiguous.statusCode, 400);
    t.match(ambiguous.json().message, /x-tenant-id/);
    t.equal(
      (await get(both, '/api/usage/summary?period=month', m.tenantId)).statusCode,
      200,
      'with the header it works',
    );
    const writeAsViewer = await app.inject({
      method: 'POST',
      url: '/api/usage/ingest',
      headers: { authorization: `Bearer ${viewer.token}` },
      payload: record(1),
    });
    t.equal(writeAsViewer.statusCode, 403, "a Viewer's only tenant is still read-only");
  },
);
