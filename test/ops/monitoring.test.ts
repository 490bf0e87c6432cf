// ops/monitoring: the alert rules pass `promtool check rules` and their own
// unit tests (`promtool test rules`; Debian's prometheus package, skipped
// with a line when missing), and every metric the rules and the Grafana
// dashboard name is one the platform exports. Also the new gauges' values
// (queue by state, oldest ready job, worker processes, the autoscaling
// signal, database reachability) on a real queue.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { sql } from '../../core/db/pool.ts';
import { enqueueJob } from '../../core/jobs/enqueue.ts';
import { collectProcessMetrics, createMetricsRegistry, renderMetrics } from '../../core/metrics.ts';
import { desiredWorkerProcesses } from '../../core/queue-metrics.ts';
import { buildTestApp } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { createMember } from '../helpers/fixtures.ts';
import { sourceRoot } from '../helpers/paths.ts';
import { waitFor } from '../helpers/wait.ts';
import { startTestWorker } from '../helpers/worker.ts';

const DIR = path.join(sourceRoot, 'ops/monitoring');
const RULES = readFileSync(path.join(DIR, 'alerts.yml'), 'utf8');
const DASHBOARD = JSON.parse(readFileSync(path.join(DIR, 'grafana-dashboard.json'), 'utf8')) as {
  panels: Array<{ title: string; targets: Array<{ expr: string }> }>;
};
const PROMTOOL = ['/usr/bin/promtool', '/usr/local/bin/promtool'].find((p) => existsSync(p)) ?? null;

t.test(
  'promtool checks the rules and runs their unit tests',
  { skip: PROMTOOL ? false : 'no promtool (apt-get install prometheus)' },
  async (t) => {
    t.match(
      execFileSync(PROMTOOL!, ['check', 'rules', 'alerts.yml'], { cwd: DIR, encoding: 'utf8' }),
      /SUCCESS: \d+ rules found/,
    );
    t.match(execFileSync(PROMTOOL!, ['test', 'rules', 'alerts.test.yml'], { cwd: DIR, encoding: 'utf8' }), /SUCCESS/);
  },
);

const TOKEN = 'metrics-token-0123456789abcdef';
const databaseUrl = await createTestDatabase(t);
const { app, db } = await buildTestApp(t, databaseUrl, { METRICS_TOKEN: TOKEN });
const member = await createMember(db, 'admin');
const scrape = async () => (await app.inject({ url: '/metrics', headers: { authorization: `Bearer ${TOKEN}` } })).body;
const sample = (text: string, series: string) => {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? null : Number(line.slice(series.length + 1));
};

t.test('the queue, the workers and the autoscaling signal as Prometheus sees them', async (t) => {
  // Two jobs due and no worker: ready, the oldest waiting, no live process, one process desired.
  for (let i = 0; i < 2; i++)
    await db.transaction((tx) => enqueueJob(tx, { kind: 'diag.noop', tenantId: member.tenantId }));
  // As if they had waited 90 s (their wait counts from when they were due, and not before they were added).
  await db.query(
    sql.unsafe`update graphile_worker._private_jobs set run_at = now() - interval '90 seconds', created_at = now() - interval '90 seconds'`,
  );
  const idle = await scrape();
  t.equal(sample(idle, 'platform_queue_jobs{kind="diag.noop",state="ready"}'), 2);
  t.ok(sample(idle, 'platform_queue_oldest_ready_seconds')! >= 89);
  t.equal(sample(idle, 'platform_worker_processes{state="live"}'), 0);
  t.equal(sample(idle, 'platform_worker_processes_desired'), 1);
  t.equal(sample(idle, 'platform_database_up'), 1);
  t.notMatch(idle, /^platform_worker_heartbeat_age_seconds /m, 'no heartbeat ever: absent, not 0');

  const worker = await startTestWorker(t, databaseUrl);
  await waitFor(
    'the jobs ran',
    async () => Number(await db.oneFirst(sql.unsafe`select count(*) from jobs where status = 'succeeded'`)) === 2,
  );
  // Graphile deletes its job a moment after the row says succeeded.
  await waitFor(
    'Graphile let the jobs go',
    async () =>
      Number(
        await db.oneFirst(sql.unsafe`select count(*) from graphile_worker.jobs where task_identifier = 'diag.noop'`),
      ) === 0,
  );
  const busy = await scrape();
  t.equal(sample(busy, 'platform_worker_processes{state="live"}'), 1);
  t.ok(sample(busy, 'platform_worker_heartbeat_age_seconds')! < 60);
  t.equal(
    sample(busy, 'platform_queue_jobs{kind="diag.noop",state="ready"}'),
    null,
    'a kind with no open job leaves the gauge',
  );
  t.ok(
    sample(busy, 'platform_queue_oldest_ready_seconds')! < 60,
    "no old job waits (the worker's own maintenance jobs may be due)",
  );
  t.ok(sample(busy, 'platform_worker_processes_desired')! <= 1, 'at most the maintenance job at hand');

  // Every metric the rules and the dashboard name is exported by an api or a worker process.
  const process = createMetricsRegistry();
  collectProcessMetrics(process);
  const exported = new Set<string>();
  for (const m of (await scrape()).matchAll(/^# HELP (\S+)/gm)) exported.add(m[1]!);
  for (const m of (await renderMetrics([worker.metrics, process])).matchAll(/^# HELP (\S+)/gm)) exported.add(m[1]!);
  const recorded = new Set([...RULES.matchAll(/^\s+- record: (\S+)/gm)].map((m) => m[1]!));
  const named = (text: string) =>
    [...text.matchAll(/\b(?:platform|http|process|nodejs)_[a-z0-9_]+\b|\bplatform:[a-z0-9_:]+/g)].map((m) => m[0]);
  const known = (name: string) =>
    recorded.has(name) || exported.has(name) || exported.has(name.replace(/_(count|sum|bucket)$/, ''));
  const inRules = [...new Set(named(RULES))];
  const inDashboard = [...new Set(DASHBOARD.panels.flatMap((p) => p.targets.flatMap((q) => named(q.expr))))];
  t.ok(inRules.length >= 8 && inDashboard.length >= 12, 'both name metrics');
  t.same(
    inRules.filter((n) => !known(n)),
    [],
    'every metric of the alert rules is exported',
  );
  t.same(
    inDashboard.filter((n) => !known(n)),
    [],
    'every metric of the dashboard is exported',
  );
  for (const alert of [
    'PlatformBacklogGrowing',
    'PlatformOldestQueuedJobTooOld',
    'PlatformJobFailureRate',
    'PlatformNoWorkerHeartbeat',
    'PlatformWebhookFailures',
    'PlatformDatabaseUnreachable',
  ]) {
    t.match(RULES, `alert: ${alert}`);
  }
});

t.test('the autoscaling signal: the largest pool over its slots per process', async (t) => {
  const queue = (rows: Array<[string, number, number]>) =>
    rows.map(([kind, running, ready]) => ({ kind, running, ready, waiting: 0, oldest_ready_s: null }));
  const live = [{ stale: false, age_s: 1, concurrency: 4, io_concurrency: 50 }];
  t.equal(desiredWorkerProcesses({ queue: [], workers: live }, { short: 4, io: 50 }), 0);
  t.equal(
    desiredWorkerProcesses({ queue: queue([['diag.noop', 4, 5]]), workers: live }, { short: 4, io: 50 }),
    3,
    '9 short jobs over 4 slots',
  );
  t.equal(
    desiredWorkerProcesses(
      {
        queue: queue([
          ['chat.turn', 60, 60],
          ['diag.noop', 1, 0],
        ]),
        workers: live,
      },
      { short: 4, io: 50 },
    ),
    3,
    '120 I/O jobs over 50 slots',
  );
  t.equal(
    desiredWorkerProcesses({ queue: queue([['diag.noop', 0, 8]]), workers: [] }, { short: 2, io: 50 }),
    4,
    'no live worker: the configured slots',
  );
});
