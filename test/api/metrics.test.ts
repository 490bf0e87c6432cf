// Prometheus metrics: GET /metrics on the api's port only with METRICS_TOKEN
// (Bearer, constant-time), request durations by route pattern, job and queue
// gauges read at scrape time (tolerant of a database outage), the worker's
// job durations, and the METRICS_PORT listener of a process entry.
import pg from 'pg';
import t from 'tap';
import { z } from 'zod';
import { sql, type DatabasePool } from '../../core/db/pool.ts';
import {
  createMetricsRegistry,
  registerDatabaseMetrics,
  renderMetrics,
  startMetricsServer,
} from '../../core/metrics.ts';
import { freePort } from '../../ops/embedded-postgres.ts';
import { buildTestApp } from '../helpers/app.ts';
import { testLogger } from '../helpers/config.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { createMember, enqueue } from '../helpers/fixtures.ts';
import { waitFor, waitForOutput } from '../helpers/wait.ts';
import { spawnWorkerProcess, startTestWorker } from '../helpers/worker.ts';

const TOKEN = 'metrics-token-0123456789abcdef';
const databaseUrl = await createTestDatabase(t);

t.test('without METRICS_TOKEN the api port serves no figures: a 404 that says how to turn them on', async (t) => {
  const { app } = await buildTestApp(t, databaseUrl);
  const res = await app.inject('/metrics');
  t.equal(res.statusCode, 404);
  t.match(res.json(), { error: 'not_found', status: 404, message: /Set METRICS_TOKEN .* or METRICS_PORT/ });
  t.notMatch(res.body, /platform_/, 'no figure');
  t.ok(
    app.routeCatalog.some((r) => r.url === '/metrics' && r.hidden),
    'hidden from the published contract',
  );
  const ownListener = await buildTestApp(t, databaseUrl, { METRICS_PORT: '9464' });
  t.match((await ownListener.app.inject('/metrics')).json(), {
    status: 404,
    message: /own listener \(METRICS_PORT=9464/,
  });
});

t.test('with METRICS_TOKEN: a Bearer token equal to it, else 401', async (t) => {
  const { app } = await buildTestApp(t, databaseUrl, { METRICS_TOKEN: TOKEN });
  const missing = await app.inject('/metrics');
  t.equal(missing.statusCode, 401);
  t.match(missing.json(), { error: 'unauthorized', status: 401 });
  t.match(missing.headers['www-authenticate'], /^Bearer/);
  t.equal((await app.inject({ url: '/metrics', headers: { authorization: `Bearer ${TOKEN}x` } })).statusCode, 401);
  t.equal((await app.inject({ url: '/metrics', headers: { authorization: 'Bearer short' } })).statusCode, 401);
  t.equal(
    (await app.inject({ url: '/metrics', headers: { authorization: TOKEN } })).statusCode,
    401,
    'the Bearer scheme is required',
  );
  const ok = await app.inject({ url: '/metrics', headers: { authorization: `Bearer ${TOKEN}` } });
  t.equal(ok.statusCode, 200);
  t.match(ok.headers['content-type'], /^text\/plain/);
  const route = app.routeCatalog.find((r) => r.method === 'GET' && r.url === '/metrics');
  t.ok(route?.hidden, 'hidden from the OpenAPI document');
});

t.test('request durations by route pattern, jobs by kind and status, queue depth, connection gauges', async (t) => {
  const { app, db } = await buildTestApp(t, databaseUrl, { METRICS_TOKEN: TOKEN });
  const member = await createMember(db, 'admin');
  const jobId = await enqueue(db, { kind: 'diag.noop', tenantId: member.tenantId });
  const scrape = async () => {
    const res = await app.inject({ url: '/metrics', headers: { authorization: `Bearer ${TOKEN}` } });
    t.equal(res.statusCode, 200);
    return res.body;
  };

  const before = await scrape();
  t.match(before, /^platform_jobs\{kind="diag\.noop",status="queued"\} 1$/m);
  t.match(before, /^platform_queue_depth 1$/m, 'the queued job is ready to run');

  const polled = await app.inject({ url: `/api/jobs/${jobId}`, headers: { authorization: `Bearer ${member.token}` } });
  t.equal(polled.statusCode, 200);
  await app.inject('/no/such/route/123');

  const worker = await startTestWorker(t, databaseUrl);
  await waitFor('the job to succeed', async () => {
    const status = await db.oneFirst(
      sql.type(z.object({ status: z.string() }))`select status from jobs where id = ${jobId}`,
    );
    return status === 'succeeded';
  });

  const text = await scrape();
  t.match(
    text,
    /^http_request_duration_seconds_bucket\{le="[^"]+",method="GET",route="\/api\/jobs\/:jobId",status_code="200"\} 1$/m,
  );
  t.match(
    text,
    /^http_request_duration_seconds_count\{method="GET",route="\/api\/jobs\/:jobId",status_code="200"\} 1$/m,
  );
  t.match(text, /^http_request_duration_seconds_count\{method="GET",route="unmatched",status_code="404"\} 1$/m);
  t.notMatch(text, new RegExp(jobId), 'never a raw URL');
  t.match(text, /^platform_jobs\{kind="diag\.noop",status="succeeded"\} 1$/m);
  t.notMatch(text, /platform_jobs\{kind="diag\.noop",status="queued"\}/, 'a status no job has any more is gone');
  t.match(text, /^platform_queue_depth \d+$/m);
  t.match(text, /^platform_listen_connected 1$/m);
  t.match(text, /^platform_websocket_connections 0$/m);
  t.notMatch(text, /^platform_metrics_scrape_errors_total\{/m, 'no scrape errors');

  // The worker's own registry: one attempt of diag.noop, succeeded.
  await waitFor('the job duration to be observed', async () =>
    /platform_job_duration_seconds_count\{kind="diag\.noop",outcome="succeeded"\} 1/.test(
      await worker.metrics.metrics(),
    ),
  );
  const workerText = await worker.metrics.metrics();
  t.match(workerText, /^platform_job_duration_seconds_bucket\{le="\+Inf",kind="diag\.noop",outcome="succeeded"\} 1$/m);
  t.notMatch(workerText, /http_request_duration_seconds/, 'the worker registry is its own');
  t.match(workerText, /^platform_worker_slots\{pool="io"\} 1000$/m, 'the pools and their slots');
  t.match(workerText, /^platform_worker_jobs_running\{pool="short"\} \d+$/m);
});

t.test('database gauges stay unset and count an error when the database does not answer', async (t) => {
  const failing = {
    any: async () => {
      throw new Error('connection refused');
    },
    oneFirst: async () => {
      throw new Error('connection refused');
    },
  } as unknown as DatabasePool;
  const registry = createMetricsRegistry();
  registerDatabaseMetrics(registry, failing);
  const text = await renderMetrics([registry]);
  t.notMatch(text, /^platform_jobs\{/m, 'no job series');
  t.notMatch(text, /^platform_queue_depth \d/m, 'no queue depth value');
  t.match(text, /^platform_metrics_scrape_errors_total\{source="platform_jobs"\} 1$/m);
  t.match(text, /^platform_metrics_scrape_errors_total\{source="platform_queue_depth"\} 1$/m);
  t.match(
    await renderMetrics([registry]),
    /^platform_metrics_scrape_errors_total\{source="platform_jobs"\} 2$/m,
    'each scrape counts',
  );
});

t.test('startMetricsServer serves /metrics without a token and nothing else', async (t) => {
  const { app } = await buildTestApp(t, databaseUrl);
  const server = await startMetricsServer({
    host: '127.0.0.1',
    port: 0,
    registries: () => [app.metrics.registry],
    logger: testLogger(),
  });
  t.teardown(server.close);
  const res = await fetch(server.url);
  t.equal(res.status, 200);
  t.match(res.headers.get('content-type'), /^text\/plain/);
  t.match(await res.text(), /# TYPE http_request_duration_seconds histogram/);
  t.equal((await fetch(server.url.replace('/metrics', '/other'))).status, 404);
  await server.close();
  await t.rejects(fetch(server.url), 'closed');
});

t.test('a worker process with METRICS_PORT serves its metrics there, without a token', async (t) => {
  const port = await freePort();
  const worker = spawnWorkerProcess(t, databaseUrl, { METRICS_PORT: String(port), METRICS_HOST: '127.0.0.1' });
  await waitForOutput(worker, /metrics listening/);
  // A job added the Graphile Worker way, without our jobs row: refused, logged and counted.
  const pool = new pg.Pool({ connectionString: databaseUrl, max: 1 });
  await pool.query(`select graphile_worker.add_job('diag.noop', '{"hello":"sql"}'::json)`);
  await pool.end();
  await waitForOutput(
    worker,
    /refused a job without a platform job row \(added with graphile_worker\.add_job directly\?\): enqueue with enqueueJob\(\)/,
  );
  const res = await fetch(`http://127.0.0.1:${port}/metrics`);
  t.equal(res.status, 200);
  const text = await res.text();
  t.match(
    text,
    /^platform_jobs_refused_total\{kind="diag\.noop",reason="no_platform_job"\} 1$/m,
    'the refusal is counted',
  );
  t.match(text, /# TYPE platform_job_duration_seconds histogram/);
  t.match(text, /^platform_queue_depth \d+$/m);
  t.match(text, /^process_cpu_user_seconds_total /m, 'Node process metrics');
  worker.child.kill('SIGTERM');
  t.equal(await worker.exited, 0, 'stops cleanly, listener closed');
});
