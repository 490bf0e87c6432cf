// Logs an operator can read: `npm start` (here on the test database) at
// info logs nothing on a schedule while idle, one line per request (method,
// route, status, duration, request id, tenant), and in the readable format
// every event is one line.
import { createServer, type AddressInfo } from 'node:net';
import t from 'tap';
import { createDatabasePool, sql } from '../../core/db/pool.ts';
import { testEnv } from '../helpers/config.ts';
import { startTestServer } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { createMember } from '../helpers/fixtures.ts';
import { waitFor, waitForOutput } from '../helpers/wait.ts';
import { linkWebhookChannel } from '../helpers/webhook-channel.ts';
import { spawnEntry, spawnWorkerProcess } from '../helpers/worker.ts';

// Idle until every schedule has fired at least once: the every-minute cron
// has fired (billing_expire's run recorded), and a sweep interval and a
// heartbeat interval have passed.
const SWEEP_MS = 15_000;
const HEARTBEAT_MS = 10_000;
const databaseUrl = await createTestDatabase(t);
const db = await createDatabasePool(databaseUrl, { maximumPoolSize: 2 });
t.teardown(() => db.end());

t.test('idle for a minute: no line; 20 requests: 20 lines, one each', async (t) => {
  // The production heartbeat and sweep timings, not the tests' fast ones.
  const env = testEnv(databaseUrl, {
    LOG_LEVEL: 'info',
    LOG_FORMAT: 'pretty',
    WORKER_HEARTBEAT_MS: String(HEARTBEAT_MS),
    WORKER_STALE_AFTER_MS: '60000',
    WORKER_SWEEP_INTERVAL_MS: String(SWEEP_MS),
  });
  const platform = spawnEntry(t, 'ops/start.ts', env);
  const [, base] = await waitForOutput(platform, /platform ready .*"url":"(http:\/\/127\.0\.0\.1:\d+)"/);
  const lines = () =>
    platform
      .output()
      .split('\n')
      .filter((l) => l.trim() !== '');
  const atReady = lines().length;

  const readyAt = Date.now();
  await waitFor(
    'the every-minute cron to fire',
    () =>
      db.exists(sql.unsafe`
    select from scheduled_job_last_runs where identifier = 'billing_expire' and started_at >= to_timestamp(${readyAt / 1000})`),
    90_000,
  );
  const intervals = readyAt + Math.max(SWEEP_MS, HEARTBEAT_MS) + 1000 - Date.now();
  if (intervals > 0) await new Promise((r) => setTimeout(r, intervals));
  const idle = lines().slice(atReady);
  t.same(idle, [], 'nothing logged while idle');

  const member = await createMember(db);
  const headers = { authorization: `Bearer ${member.token}`, 'x-tenant-id': member.tenantId };
  const before = lines().length;
  for (let i = 0; i < 20; i++)
    t.equal(
      (await fetch(`${base}/api/chat/sessions`, { headers: { ...headers, 'x-request-id': `quiet-${i}` } })).status,
      200,
    );
  for (let i = 0; i < 5; i++) await fetch(`${base}/readyz`); // probes log at debug
  const requests = await waitFor('20 request lines', async () => {
    const added = lines().slice(before);
    return added.length >= 20 ? added : null;
  });
  t.equal(requests.length, 20, 'one line per request');
  requests.forEach((line, i) => {
    t.match(
      line,
      new RegExp(
        `INFO.*GET /api/chat/sessions 200 [\\d.]+ ms .*"reqId":"quiet-${i}".*"method":"GET","route":"/api/chat/sessions","status":200,"ms":[\\d.]+,"tenant":"${member.tenantId}"`,
      ),
      `request ${i}`,
    );
  });
  platform.child.kill('SIGINT');
  t.equal(await platform.exited, 0);
  t.same(
    lines().filter((l) => !/^\[\d\d:\d\d:\d\d\.\d{3}\] [A-Z]+ /.test(l)),
    [],
    'every line is one event',
  );
});

t.test(
  "a reply that cannot be delivered: one line per attempt naming the host and the network's error code, no stack",
  async (t) => {
    const closed = await new Promise<number>((resolve) => {
      const server = createServer().listen(0, '127.0.0.1', () => {
        const { port } = server.address() as AddressInfo;
        server.close(() => resolve(port)); // nothing listens there any more
      });
    });
    const overrides = { PROVIDER_ALLOW_PRIVATE_URLS: 'true' };
    const api = await startTestServer(t, databaseUrl, overrides);
    const worker = spawnWorkerProcess(t, databaseUrl, { ...overrides, LOG_FORMAT: 'pretty' });
    await waitForOutput(worker, /worker started/);
    const member = await createMember(db);
    const channel = await linkWebhookChannel(
      api,
      { authorization: `Bearer ${member.token}`, 'x-tenant-id': member.tenantId },
      { url: `http://127.0.0.1:${closed}/replies` },
      'quiet-logs-signing-secret-0123',
    );
    await channel.say('Hello?');
    const [line] = await waitForOutput(worker, /WARN [^\n]*job attempt failed; retry in [^\n]*/);
    t.match(line, `127.0.0.1:${closed} could not be reached (ECONNREFUSED)`, 'the host and the cause');
    t.notMatch(worker.output(), /\n\s+at /, 'no stack trace');
    worker.child.kill('SIGTERM');
    await worker.exited;
  },
);
