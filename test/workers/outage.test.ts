// PostgreSQL stopped and started again under load. The api and the worker run
// as their own processes (npm run start:api / start:worker) on a cluster of
// this test's own (the shared test server must stay up for the other files).
// During the outage: /readyz 503, routes 503 fast with Retry-After on every
// surface, both processes alive. Afterwards: the LISTEN connections are back,
// websocket clients read every job's final state, and every accepted job
// finished exactly once.
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import t from 'tap';
import { z } from 'zod';
import { createDatabasePool, sql } from '../../core/db/pool.ts';
import { migrate } from '../../core/db/migrate.ts';
import { freePort, startEmbeddedPostgres, type EmbeddedDatabase } from '../../ops/embedded-postgres.ts';
import { signPlatformToken } from '../../core/auth/platform-token.ts';
import { TEST_SECRET, testEnv, testLogger } from '../helpers/config.ts';
import { createMember, enqueue } from '../helpers/fixtures.ts';
import { waitFor, waitForOutput } from '../helpers/wait.ts';
import { spawnEntry } from '../helpers/worker.ts';
import { isJobMessage, TestSocket } from '../helpers/ws.ts';

const logger = testLogger('outage');
const directory = path.join(process.env.TEST_SCRATCH_DIR!, `outage-${randomBytes(3).toString('hex')}`);
let server: EmbeddedDatabase = await startEmbeddedPostgres({ directory, unsafeFast: true, logger });
t.teardown(() => server.stop());
const pgPort = server.port;
await migrate(server.url, logger);
const db = await createDatabasePool(server.url, { maximumPoolSize: 2 });
t.teardown(() => db.end());
const apiPort = await freePort();
const base = `http://127.0.0.1:${apiPort}`;
const member = await createMember(db);
// Platform tokens name the deployment's URL as their issuer.
member.token = await signPlatformToken({ userId: member.userId }, Buffer.from(TEST_SECRET, 'base64'), base);
const env = testEnv(server.url, { LOG_LEVEL: 'info', BASE_URL: base, PORT: String(apiPort), WORKER_CONCURRENCY: '4' });
const api = spawnEntry(t, 'api/server.ts', env);
const worker = spawnEntry(t, 'workers/runner.ts', env);
await waitForOutput(api, /api listening/);
await waitForOutput(worker, /worker started/);

if (process.env.OUTAGE_LOG) t.teardown(() => void process.stdout.write(`${api.output()}\n${worker.output()}\n`));
const call = (url: string, init: RequestInit = {}) =>
  fetch(`${base}${url}`, { ...init, signal: AbortSignal.timeout(10_000) });
const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
const JobRow = z.object({ id: z.string(), status: z.string(), attempts: z.number(), result: z.unknown() });

t.test('PostgreSQL stops and starts again while requests, websockets and jobs are in flight', async (t) => {
  // An agent token from before the outage, to see the Agent API's refusal.
  const registered = await (
    await call('/agent/identity', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"type":"anonymous"}',
    })
  ).json();
  const exchanged = await call('/oauth2/token', {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({
      grant_type: 'urn:ietf:params:oauth:grant-type:jwt-bearer',
      assertion: registered.identity.assertion,
      resource: `${base}/api/agent`,
    }),
  });
  const agentToken = (await exchanged.json()).access_token as string;
  t.equal((await call('/api/agent/v1/me', { headers: bearer(agentToken) })).status, 200);

  // Six jobs of about 3 s each: four run at once, two wait.
  const jobIds: string[] = [];
  for (let i = 0; i < 6; i++)
    jobIds.push(
      await enqueue(db, { kind: 'diag.steps', tenantId: member.tenantId, input: { steps: 15, delayMs: 200 } }),
    );
  const socket = await TestSocket.connect(`ws://127.0.0.1:${apiPort}/api/ws`, member.token);
  t.teardown(() => socket.close());
  for (const jobId of jobIds) socket.send({ type: 'subscribe', jobId });
  for (const jobId of jobIds) await socket.next(isJobMessage(jobId)); // each subscription is in place
  await waitFor('jobs to be running', async () => {
    const running = await db.anyFirst(
      sql.type(z.object({ id: z.string() }))`select id from jobs where status = 'running'`,
    );
    return running.length >= 2;
  });

  await server.stop();
  const workerLogAtStop = worker.output().length;

  const ready = await waitFor(
    '/readyz to answer 503',
    async () => {
      const res = await call('/readyz').catch(() => null);
      return res?.status === 503 ? res : null;
    },
    10_000,
  );
  t.equal(ready.status, 503, '/readyz says not ready');

  const platform = await call(`/api/jobs/${jobIds[0]}`, { headers: bearer(member.token) });
  t.equal(platform.status, 503, 'platform route: 503');
  t.equal(platform.headers.get('retry-after'), '2');
  t.match(await platform.json(), { error: 'service_unavailable', status: 503 });
  const agent = await call('/api/agent/v1/me', { headers: bearer(agentToken) });
  t.equal(agent.status, 503, 'Agent API: 503');
  t.equal(agent.headers.get('retry-after'), '2');
  t.match(await agent.json(), { code: 'temporarily_disabled', next_action: 'retry_later', retry_after: 2 });
  const identity = await call('/agent/identity', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: '{"type":"anonymous"}',
  });
  t.equal(identity.status, 503, 'identity provider: 503');
  t.match(await identity.json(), { code: 'service_unavailable', retry_after: 2 });
  // Refused fast: the api's log names why it answered 503, and it must be
  // the refused connection itself, not the pool's 10 s connect timeout.
  const me = await call('/api/auth/me', { headers: bearer(member.token) });
  t.equal(me.status, 503);
  const requestId = me.headers.get('x-request-id')!;
  const logged = await waitFor('the 503 in the api log', async () =>
    api
      .output()
      .split('\n')
      .find((line) => line.includes(requestId) && line.includes('database unavailable')),
  );
  t.notMatch(logged, /timeout exceeded/, `refused at once, not after a connection timeout: ${logged}`);

  // The running jobs write progress every 200 ms: wait until the worker has
  // met the outage (not for a guessed number of seconds).
  await waitFor(
    'the worker to meet the outage',
    async () => /database unreachable|ECONNREFUSED|Connection terminated/.test(worker.output().slice(workerLogAtStop)),
    60_000,
  );
  t.equal(api.child.exitCode, null, 'the api process is alive');
  t.equal(worker.child.exitCode, null, 'the worker process is alive');

  server = await startEmbeddedPostgres({ directory, port: pgPort, unsafeFast: true, logger });
  await waitFor('/readyz to answer 200', async () => (await call('/readyz').catch(() => null))?.status === 200, 30_000);

  const finals = await waitFor(
    'every job to finish',
    async () => {
      const rows = await db.any(
        sql.type(JobRow)`select id, status, attempts, result from jobs where id = any(${sql.array(jobIds, 'uuid')})`,
      );
      return rows.every((r) => r.status === 'succeeded') ? rows : null;
    },
    120_000,
  );
  for (const row of finals) {
    t.same(row.result, { steps: 15, attempt: row.attempts }, 'one result, from the attempt that finished');
  }
  // A job hit by the outage either failed its attempt and ran again, or
  // waited in a progress write (the worker's completion pool waits for the
  // database, as Graphile's does) and went on: either way one result.
  t.ok(
    finals.some((r) => r.attempts > 1) || /completion pool: database unreachable; waiting for it/.test(worker.output()),
    'the outage hit jobs in flight',
  );
  await waitFor(
    'Graphile to let go of every job',
    async () =>
      (await db.oneFirst(
        sql.type(
          z.object({ n: z.number() }),
        )`select count(*)::int as n from graphile_worker.jobs where task_identifier = 'diag.steps'`,
      )) === 0,
    60_000,
  );

  for (const jobId of jobIds) {
    let last: { status: string } | undefined;
    while (last?.status !== 'succeeded')
      last = (await socket.next(isJobMessage(jobId), 30_000)).job as { status: string };
  }
  t.pass('the websocket delivered every final state (LISTEN re-established, subscriptions re-read)');
  t.equal(api.child.exitCode, null, 'the api process is still alive');
  t.equal(worker.child.exitCode, null, 'the worker process is still alive');
  t.notMatch(api.output() + worker.output(), /unhandled promise rejection; stopping/);
});
