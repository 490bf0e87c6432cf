// Logs an operator can read: `npm start` (here on the test database) at
// info logs nothing on a schedule while idle, one line per request (method,
// route, status, duration, request id, tenant), and in the readable format
// every event is one line.
import t from 'tap';
import { createDatabasePool } from '../../core/db/pool.ts';
import { testEnv } from '../helpers/config.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { createMember } from '../helpers/fixtures.ts';
import { waitFor, waitForOutput } from '../helpers/wait.ts';
import { spawnEntry } from '../helpers/worker.ts';

const IDLE_MS = 61_000; // every schedule fires at least once: the every-minute cron, the sweeps, the heartbeats
const databaseUrl = await createTestDatabase(t);
const db = await createDatabasePool(databaseUrl, { maximumPoolSize: 2 });
t.teardown(() => db.end());

t.test('idle for a minute: no line; 20 requests: 20 lines, one each', async (t) => {
  // The production heartbeat and sweep timings, not the tests' fast ones.
  const env = testEnv(databaseUrl, { LOG_LEVEL: 'info', LOG_FORMAT: 'pretty', WORKER_HEARTBEAT_MS: '10000', WORKER_STALE_AFTER_MS: '60000', WORKER_SWEEP_INTERVAL_MS: '15000' });
  const platform = spawnEntry(t, 'ops/start.ts', env);
  const [, base] = await waitForOutput(platform, /platform ready .*"url":"(http:\/\/127\.0\.0\.1:\d+)"/);
  const lines = () => platform.output().split('\n').filter((l) => l.trim() !== '');
  const atReady = lines().length;

  await new Promise((r) => setTimeout(r, IDLE_MS));
  const idle = lines().slice(atReady);
  t.same(idle, [], 'nothing logged while idle');

  const member = await createMember(db);
  const headers = { authorization: `Bearer ${member.token}`, 'x-tenant-id': member.tenantId };
  const before = lines().length;
  for (let i = 0; i < 20; i++) t.equal((await fetch(`${base}/api/chat/sessions`, { headers: { ...headers, 'x-request-id': `quiet-${i}` } })).status, 200);
  for (let i = 0; i < 5; i++) await fetch(`${base}/readyz`); // probes log at debug
  const requests = await waitFor('20 request lines', async () => {
    const added = lines().slice(before);
    return added.length >= 20 ? added : null;
  });
  t.equal(requests.length, 20, 'one line per request');
  requests.forEach((line, i) => {
    t.match(line, new RegExp(`INFO.*GET /api/chat/sessions 200 [\\d.]+ ms .*"reqId":"quiet-${i}".*"method":"GET","route":"/api/chat/sessions","status":200,"ms":[\\d.]+,"tenant":"${member.tenantId}"`), `request ${i}`);
  });
  platform.child.kill('SIGINT');
  t.equal(await platform.exited, 0);
  t.same(lines().filter((l) => !/^\[\d\d:\d\d:\d\d\.\d{3}\] [A-Z]+ /.test(l)), [], 'every line is one event');
});
