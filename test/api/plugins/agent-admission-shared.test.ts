// The admission limit is shared: two app instances on one database act as two
// api replicas leasing blocks of tokens from agent_admission_windows.
import pg from 'pg';
import t from 'tap';
import { z } from 'zod';
import { createRegistration } from '../../../core/identity/registrations.ts';
import { sql } from '../../../core/db/pool.ts';
import { sweepExpiredRows } from '../../../core/maintenance/expired-rows.ts';
import { buildTestApp, type TestApi } from '../../helpers/app.ts';
import { adminUrl, createTestDatabase, testPool } from '../../helpers/db.ts';
import { agentAccessToken } from '../../helpers/principals.ts';
import { waitFor } from '../../helpers/wait.ts';

async function tokenFor(api: TestApi) {
  const { registration } = await createRegistration(api.db, {
    type: 'anonymous',
    ip: '127.0.0.1',
    claimTokenTtlS: 3600,
  });
  return agentAccessToken(api.app, api.config, registration, ['svc:boards:read']);
}

const me = (api: TestApi, token: string) =>
  api.app.inject({ url: '/api/agent/v1/me', headers: { authorization: `Bearer ${token}` } });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** Waits until just after a window boundary, so a short test fits inside one window. */
const windowStartsNow = async (windowMs: number) => sleep(windowMs - (Date.now() % windowMs) + 20);

async function adminQuery(text: string) {
  const client = new pg.Client({ connectionString: adminUrl() });
  await client.connect();
  try {
    return await client.query(text);
  } finally {
    await client.end();
  }
}

const Row = z.object({ granted: z.number(), leases: z.number() });
const windowRows = (api: TestApi) => api.db.any(sql.type(Row)`select granted, leases from agent_admission_windows`);

t.test(
  'two replicas share one limit: 10 admitted in total, then 429 on either; a new window admits again',
  async (t) => {
    const databaseUrl = await createTestDatabase(t);
    const env = { AGENT_API_RATE_LIMIT: '10', AGENT_API_RATE_WINDOW_MS: '3000', AGENT_API_RATE_LEASE: '3' };
    const [a, b] = [await buildTestApp(t, databaseUrl, env), await buildTestApp(t, databaseUrl, env)];
    const token = await tokenFor(a);
    await windowStartsNow(3000);
    const windowEnd = Date.now() - (Date.now() % 3000) + 3000;
    let admitted = 0;
    const refusedBy = new Set<string>();
    for (let i = 0; i < 24; i++) {
      const [name, api] = i % 2 === 0 ? (['a', a] as const) : (['b', b] as const);
      const before = Date.now();
      const res = await me(api, token);
      const after = Date.now();
      if (res.statusCode === 200) {
        t.equal(refusedBy.size, 0, `request ${i + 1} admitted only before any refusal`);
        admitted++;
        continue;
      }
      t.equal(res.statusCode, 429, `request ${i + 1} on ${name}`);
      refusedBy.add(name);
      const retryAfter = Number(res.headers['retry-after']);
      const [least, most] = [Math.ceil((windowEnd - after) / 1000), Math.ceil((windowEnd - before) / 1000)];
      t.ok(retryAfter >= least && retryAfter <= most, `Retry-After ${retryAfter}: to the end of the shared window`);
      t.match(res.headers['content-type'], /^application\/json; charset=utf-8/);
      t.same(res.json(), {
        code: 'rate_limit_exceeded',
        message: `At most 10 requests per 3 s; retry after ${retryAfter} s without changing identity or tenant data.`,
        next_action: 'retry_same_request_later',
        retry_after: retryAfter,
        limit: 10,
        window_seconds: 3,
      });
    }
    t.ok(Date.now() < windowEnd, 'all of it happened in one window');
    t.equal(admitted, 10, 'exactly the limit admitted across both replicas');
    t.same([...refusedBy].sort(), ['a', 'b'], 'both replicas refuse once the shared window is spent');
    t.same(
      await windowRows(a),
      [{ granted: 10, leases: 5 }],
      'leases of 3, 3, 2, 1, 1: never more than half of what is left',
    );

    await sleep(windowEnd - Date.now() + 20);
    t.equal((await me(b, token)).statusCode, 200, 'the next window admits on b');
    t.equal((await me(a, token)).statusCode, 200, 'and on a');
  },
);

t.test('about one database write per lease, not per request', async (t) => {
  const databaseUrl = await createTestDatabase(t);
  const env = { AGENT_API_RATE_LIMIT: '100000', AGENT_API_RATE_WINDOW_MS: '600000', AGENT_API_RATE_LEASE: '10' };
  const [a, b] = [await buildTestApp(t, databaseUrl, env), await buildTestApp(t, databaseUrl, env)];
  const token = await tokenFor(a);
  // 8 concurrent callers per replica share each in-flight lease.
  const perReplica = 200;
  const burst = async (api: TestApi) => {
    const statuses: number[] = [];
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        while (statuses.length < perReplica) statuses.push((await me(api, token)).statusCode);
      }),
    );
    return statuses;
  };
  const statuses = (await Promise.all([burst(a), burst(b)])).flat();
  t.ok(
    statuses.every((s) => s === 200),
    `${statuses.length} requests admitted`,
  );
  const [row] = await windowRows(a);
  const requests = statuses.length;
  t.ok(
    row!.granted >= requests && row!.granted <= requests + 2 * 10,
    `granted ${row!.granted} for ${requests} requests`,
  );
  t.ok(
    row!.leases <= Math.ceil(requests / 10) + 2,
    `${row!.leases} lease statements for ${requests} requests (lease 10)`,
  );

  // PostgreSQL's own count of rows written to the table, flushed when the
  // replicas' connections end: it must agree with the leases column.
  await a.close();
  await b.close();
  const pool = await testPool(t, databaseUrl);
  const Count = z.object({ n: z.number() });
  await waitFor(
    "the replicas' connections to end",
    async () =>
      0 ===
      (await pool.oneFirst(sql.type(Count)`
    select count(*)::int as n from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()`)),
  );
  const writes = () =>
    pool.oneFirst(sql.type(Count)`
    select (n_tup_ins + n_tup_upd)::int as n from pg_stat_user_tables where relname = 'agent_admission_windows'`);
  // A backend leaves pg_stat_activity just before it flushes its statistics.
  const written = await waitFor(
    'table statistics to settle',
    async () => {
      const first = await writes();
      await sleep(300);
      return first === (await writes()) && first >= row!.leases ? first : null;
    },
    15_000,
  );
  t.equal(written, row!.leases, `PostgreSQL counts ${written} row writes for ${requests} requests`);
});

t.test(
  'PostgreSQL unreachable: each replica falls back to the local limit, logs once, shares again when it is back',
  async (t) => {
    const databaseUrl = await createTestDatabase(t);
    const name = new URL(databaseUrl).pathname.slice(1);
    const api = await buildTestApp(t, databaseUrl, {
      AGENT_API_RATE_LIMIT: '5',
      AGENT_API_RATE_WINDOW_MS: '600000',
      AGENT_API_RATE_LEASE: '2',
      LOG_LEVEL: 'info',
    });
    const token = await tokenFor(api);
    t.equal((await me(api, token)).statusCode, 200, 'a lease of 2 from PostgreSQL');

    // For real: the server refuses new connections to the database and ends the open ones.
    await adminQuery(`alter database "${name}" allow_connections false`);
    await adminQuery(`select pg_terminate_backend(pid) from pg_stat_activity where datname = '${name}'`);
    const down: number[] = [];
    for (let i = 0; i < 8; i++) down.push((await me(api, token)).statusCode);
    t.same(
      down.map((s) => s === 429),
      [false, false, false, false, true, true, true, true],
      `the local limit of 5 in this window (1 before the outage): ${down.join(' ')}`,
    );
    t.ok(
      down.slice(0, 4).every((s) => s === 200 || s === 503),
      'admitted requests reach the route (200 from its caches, or 503)',
    );
    const warnings = api
      .logs()
      .split('\n')
      .filter((line) => line.includes('cannot lease from PostgreSQL'));
    t.equal(warnings.length, 1, 'one warning for the outage');
    t.match(JSON.parse(warnings[0]!), { level: 40 });

    await adminQuery(`alter database "${name}" allow_connections true`);
    // A new principal (its own window): after the retry pause it leases from PostgreSQL again.
    const other = await tokenFor(api);
    await waitFor(
      'a lease written after the outage',
      async () => {
        await me(api, other);
        return (await windowRows(api)).length === 2;
      },
      15_000,
    );
    t.match(api.logs(), /PostgreSQL is back/);
  },
);

t.test('the expired-rows sweep removes closed windows and keeps the open one', async (t) => {
  const databaseUrl = await createTestDatabase(t);
  const api = await buildTestApp(t, databaseUrl, { AGENT_API_RATE_WINDOW_MS: '60000' });
  await api.db.query(sql.unsafe`
    insert into agent_admission_windows (key, window_start, granted, last_grant) values
      ('p:old', date_bin('1 minute', now() - interval '3 minutes', 'epoch'), 5, 5),
      ('p:open', date_bin('1 minute', now(), 'epoch'), 5, 5)`);
  const removed = await sweepExpiredRows(api.db, api.config);
  t.equal(removed['closed agent admission windows'], 1);
  t.same(await api.db.anyFirst(sql.type(z.object({ key: z.string() }))`select key from agent_admission_windows`), [
    'p:open',
  ]);
});
