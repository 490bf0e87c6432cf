// `npm run bench`: one embedded PostgreSQL, every figure next to a baseline
// measured in the same run. Prints a table; nothing here is pass/fail.
//   BENCH_SECONDS   duration of each throughput phase (default 4)
//   BENCH_SAMPLES   latency samples per figure (default 300)
//   BENCH_ONLY      comma list of sections to run: jobs, peers, fairness, streaming, websocket, chat, http, billing,
//                   channels, scale-out, runtime (default all; the raw-insert baseline always runs)
//   BENCH_STREAM_TURNS  concurrent streaming turns in the streaming section (default 1000)
//   BENCH_STATEMENTS=1  print each section's most expensive SQL statements (pg_stat_statements)
//   BENCH_PROFILE=<dir>  write a CPU profile of the api during the chat send phase (32 sessions) there
//   BENCH_SCALE=<factor>  last, the scale model: request figures before and after seeding factor x
//                   (10M finished jobs, 2M messages, 10k tenants, 100k sessions, 1M usage records)
import { mkdtempSync, rmSync, chmodSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { EventEmitter } from 'node:events';
import { run, type WorkerEvents } from 'graphile-worker';
import pg from 'pg';
import { z } from 'zod';
import { loadConfig } from '../../core/config.ts';
import { migrate } from '../../core/db/migrate.ts';
import { createDatabasePool, sql } from '../../core/db/pool.ts';
import { GroupCommitter } from '../../core/jobs/group-commit.ts';
import { graphileLogger } from '../../core/graphile-logger.ts';
import { createLogger } from '../../core/logger.ts';
import { commandLine } from '../../core/process/command-line.ts';
import { startWorker } from '../../workers/worker.ts';
import { startEmbeddedPostgres } from '../embedded-postgres.ts';
import { Report, sleep } from './measure.ts';
import {
  enqueueBacklog,
  enqueueGrouped,
  enqueueUngrouped,
  rawAddJob,
  rawExecuted,
  rawInserts,
  rawNotifyLatency,
  resetQueues,
  startLatency,
  type BenchContext,
} from './scenarios.ts';
import { billingFigures } from './billing.ts';
import { channelFigures } from './channels.ts';
import { chatFigures } from './chat.ts';
import { fairnessFigures } from './fairness.ts';
import { bullmqFigures } from './bullmq.ts';
import { pgBossFigures } from './pgboss.ts';
import { streamingFigures } from './streaming.ts';
import { httpFigures } from './http.ts';
import { websocketLatency } from './websocket.ts';
import { scaleOutFigures } from './scale-out.ts';
import { startFigures } from './runtime.ts';
import { SCALE_FIGURES, scaleFigures, seedScale } from './scale.ts';
import { printStatements, startStatements, statementSettings } from './statements.ts';

commandLine(
  `
usage: npm run bench
Prints speed figures as ratios against baselines measured in the same run, on
a scratch embedded PostgreSQL. BENCH_ONLY=jobs,peers,fairness,streaming,
websocket,chat,http,billing,channels,scale-out,runtime picks sections; BENCH_SECONDS,
BENCH_SAMPLES, BENCH_STREAM_TURNS, BENCH_STATEMENTS=1 and BENCH_PROFILE=<dir>
tune it; BENCH_SCALE=1 adds the scale model at the end (docs/bench.md).`,
  {},
);
const seconds = Number(process.env.BENCH_SECONDS ?? 4);
const samples = Number(process.env.BENCH_SAMPLES ?? 300);
const selected = process.env.BENCH_ONLY ? new Set(process.env.BENCH_ONLY.split(',').map((x) => x.trim())) : null;
const only = (
  section:
    | 'jobs'
    | 'peers'
    | 'fairness'
    | 'streaming'
    | 'websocket'
    | 'chat'
    | 'http'
    | 'billing'
    | 'channels'
    | 'scale-out'
    | 'runtime',
) => !selected || selected.has(section);
const streamTurns = Number(process.env.BENCH_STREAM_TURNS ?? 1000);
const logger = createLogger(process.env.LOG_LEVEL ?? 'warn', 'bench');
const scratch = mkdtempSync(path.join(tmpdir(), 'platform-bench-'));
chmodSync(scratch, 0o755);
const database = await startEmbeddedPostgres({
  directory: path.join(scratch, 'pg'),
  logger,
  settings: statementSettings,
});
const report = new Report();

try {
  const url = database.url;
  await migrate(url, logger);
  const db = await createDatabasePool(url, { maximumPoolSize: 34 });
  await db.query(sql.unsafe`create table bench_raw (id bigserial primary key, payload jsonb not null)`);
  await startStatements(db);
  const tenantId = (await db.oneFirst(sql.unsafe`insert into tenants (name) values ('bench') returning id`)) as string;
  const ctx: BenchContext = { url, db, logger, seconds, tenantId };
  let ourNoop: number | null = null;
  process.stderr.write(
    `bench: PostgreSQL ${database.port}, ${seconds} s per throughput phase, ${samples} latency samples\n`,
  );

  // (a) baseline: single-row jsonb inserts, each its own transaction.
  const raw8 = await rawInserts(ctx, 8);
  report.add('raw insert/s, 8 connections', raw8.perSecond, 'ops/s');
  const raw32 = await rawInserts(ctx, 32);
  report.add('raw insert/s, 32 connections', raw32.perSecond, 'ops/s');
  const rawBase = { name: 'raw insert 32c', value: raw32.perSecond };

  const benchEnv = {
    DATABASE_URL: url,
    NODE_ENV: 'production',
    LOG_LEVEL: 'warn',
    DATA_DIR: scratch,
    PLATFORM_JWT_SECRET: Buffer.alloc(32, 3).toString('base64'),
    DATA_ENCRYPTION_KEY: Buffer.alloc(32, 4).toString('base64'),
    WORKER_CONCURRENCY: '8',
    WS_MAX_SUBSCRIPTIONS: String(samples + 10),
    PORT: '0',
    AGENT_API_RATE_LIMIT: '1000000', // the bench measures throughput, not the admission limit
    PLAN_MAX_OPEN_JOBS: 'free=100000000,pro=100000000,enterprise=100000000',
  }; // nor the accounts' quotas
  const config = loadConfig(benchEnv);

  await printStatements(db, 'baseline');
  if (only('jobs')) {
    // (b) raw Graphile Worker.
    await resetQueues(ctx);
    const added = await rawAddJob(ctx, 32);
    report.add('graphile add_job/s, 32 connections', added.perSecond, 'ops/s', rawBase);
    await resetQueues(ctx);
    const rawRun = await rawExecuted(ctx, 5000, 8);
    report.add('graphile no-op jobs executed/s (concurrency 8)', rawRun, 'jobs/s');
    await resetQueues(ctx);
    const rawBatched = await rawExecuted(ctx, 5000, 8, true);
    report.add('graphile no-op jobs executed/s (concurrency 8, local queue, batched completion)', rawBatched, 'jobs/s');

    // (c) our enqueue: jobs row + Graphile job in one transaction.
    await resetQueues(ctx);
    const single = await enqueueUngrouped(ctx, 32, db);
    report.add('our enqueue/s, one transaction per request, 32 callers', single.perSecond, 'ops/s', rawBase);
    // All of them one account's (the bench tenant's): its separate requests must not wait on each other.
    report.add(
      "one account's enqueues/s, one transaction per request, 32 callers, vs graphile add_job/s",
      single.perSecond,
      'ops/s',
      { name: 'graphile add_job/s', value: added.perSecond },
      '>= 0.80x',
    );
    await resetQueues(ctx);
    const grouped = await enqueueGrouped(ctx, 32, db);
    report.add('our enqueue/s, group commit, 32 callers', grouped.perSecond, 'ops/s', rawBase, '>= 0.50x');

    // Our worker draining no-op jobs of one tenant, with status updates and
    // NOTIFY per job: without the fair order (jobs enqueued at now(), as plain
    // Graphile orders them), then as shipped. Counted in the database: the
    // worker starts on the backlog before any event listener could be attached.
    const drain = async (fair: boolean) => {
      await resetQueues(ctx);
      await enqueueBacklog(ctx, 5000, fair);
      const t0 = performance.now();
      const drainer = await startWorker({ config, databaseUrl: url, logger });
      // Until no no-op job is open: one probe of the open jobs' index, not a count of every finished one.
      for (;;) {
        const open = await db.oneFirst(sql.type(z.object({ open: z.boolean() }))`
          select exists (select 1 from jobs where status in ('queued', 'running', 'cancelling') and kind = 'diag.noop') as open`);
        if (!open) break;
        await sleep(20);
      }
      const perSecond = 5000 / ((performance.now() - t0) / 1000);
      return { perSecond, drainer };
    };
    const unfair = await drain(false);
    await unfair.drainer.stop();
    report.add(
      'our no-op jobs executed/s (concurrency 8, tenant cap off)',
      unfair.perSecond,
      'jobs/s',
      { name: 'graphile', value: rawRun },
      '>= 0.60x',
    );
    const { perSecond: fairRate, drainer: worker } = await drain(true);
    report.add(
      'our no-op jobs executed/s (one tenant, default settings)',
      fairRate,
      'jobs/s',
      { name: 'graphile', value: rawRun },
      '>= 0.60x',
    );
    report.add(
      'lone tenant no-op jobs, default settings, vs cap off',
      fairRate,
      'jobs/s',
      { name: 'fair order off', value: unfair.perSecond },
      '>= 0.90x',
    );
    report.add(
      'platform no-op jobs vs Graphile Worker with local queue and batched completion',
      fairRate,
      'jobs/s',
      { name: 'graphile, local queue + batched', value: rawBatched },
      '>= 0.70x',
    );
    ourNoop = fairRate;

    // (d) enqueue -> task start latency; baseline: raw add_job -> start.
    await resetQueues(ctx);
    const rawEvents: WorkerEvents = new EventEmitter() as WorkerEvents;
    const rawRunner = await run({
      connectionString: url,
      concurrency: 1,
      noHandleSignals: true,
      taskList: { 'bench.noop': async () => undefined },
      logger: graphileLogger(logger),
      events: rawEvents,
    });
    const sender = new pg.Client({ connectionString: url });
    await sender.connect();
    let n = 0;
    const rawStart = await startLatency(
      samples,
      rawEvents,
      (p) => (p as { n?: number }).n?.toString(),
      async () => {
        const id = String(++n);
        await sender.query(`select graphile_worker.add_job('bench.noop', json_build_object('n', $1::int))`, [id]);
        return id;
      },
    );
    await sender.end();
    await rawRunner.stop();
    // Through the group committer, as the api enqueues.
    const committer = new GroupCommitter(db, { logger });
    const ourStart = await startLatency(
      samples,
      worker.events,
      (p) => (p as { jobId?: string }).jobId,
      async () => {
        const [job] = await committer.enqueue([{ kind: 'diag.noop', tenantId }]);
        return job!.id;
      },
    );
    for (const p of ['p50', 'p95', 'p99'] as const) {
      report.add(
        `enqueue -> task start ${p}`,
        ourStart[p],
        'ms',
        { name: `graphile ${p}`, value: rawStart[p] },
        p === 'p50' ? '<= 5 ms' : undefined,
      );
    }
    await worker.stop();
  }

  await printStatements(db, 'jobs');
  if (only('peers')) {
    // (d1) pg-boss on the same PostgreSQL, same no-op job, same concurrency.
    await resetQueues(ctx);
    const boss = await pgBossFigures(ctx, samples, 8);
    report.add('pg-boss enqueue/s, 32 callers', boss.enqueue.perSecond, 'ops/s', rawBase);
    report.add('pg-boss no-op jobs executed/s (concurrency 8)', boss.executedPerSecond, 'jobs/s');
    if (ourNoop !== null)
      report.add(
        'our no-op jobs vs pg-boss',
        ourNoop,
        'jobs/s',
        { name: 'pg-boss', value: boss.executedPerSecond },
        '>= 1.0x',
      );
    report.add('pg-boss enqueue -> start p50', boss.start.p50, 'ms');
    report.add('pg-boss enqueue -> start p99', boss.start.p99, 'ms');
    // (d1') BullMQ on a Redis of its own, as durable as a commit (appendfsync always), same job and concurrency.
    const bull = await bullmqFigures(ctx, { callers: 32, concurrency: 8, jobs: 5_000 });
    if (!bull) {
      process.stderr.write(
        'bench: redis-server is not installed (apt-get install redis-server): the BullMQ lines are skipped\n',
      );
    } else {
      process.stderr.write(`bench: BullMQ on Redis ${bull.redisVersion}, appendfsync always\n`);
      report.add('BullMQ enqueue/s, 32 callers', bull.enqueue.perSecond, 'ops/s', rawBase);
      report.add(
        'BullMQ no-op jobs executed/s (concurrency 8, Redis appendfsync always)',
        bull.executedPerSecond,
        'jobs/s',
      );
      if (ourNoop !== null)
        report.add(
          'our no-op jobs vs BullMQ (appendfsync always)',
          ourNoop,
          'jobs/s',
          { name: 'BullMQ', value: bull.executedPerSecond },
          '>= 1.0x',
        );
    }
  }

  await printStatements(db, 'peers');
  if (only('fairness')) {
    // (d2) A noisy account floods the I/O pool from 4 workspaces; a quiet account's jobs start at the next free slot.
    const fair = await fairnessFigures(ctx, benchEnv);
    for (const p of ['p50', 'p99'] as const) {
      report.add(
        `quiet tenant start behind a noisy account (4 workspaces), ${p}`,
        fair.fair[p],
        'ms',
        { name: `first come first served ${p}`, value: fair.fifo[p] },
        p === 'p99' ? '<= 100 ms' : undefined,
      );
    }
  }

  await printStatements(db, 'fairness');
  if (only('streaming')) {
    // (d3) Long streaming turns: one worker process holding them all.
    await resetQueues(ctx);
    const s = await streamingFigures(ctx, config, benchEnv, streamTurns);
    report.add('concurrent streaming turns per worker process', s.concurrent, 'turns', 'none', '>= 1,000');
    report.add(
      `stream delta -> websocket p50 (${s.turns.toLocaleString('en')} turns)`,
      s.deltaLatency.p50,
      'ms',
      'none',
    );
    report.add(
      `stream delta -> websocket p99 (${s.turns.toLocaleString('en')} turns)`,
      s.deltaLatency.p99,
      'ms',
      'none',
      '<= 100 ms',
    );
    report.add(
      `worker CPU cores at ${s.turns.toLocaleString('en')} streaming turns`,
      s.workerCores,
      'cores',
      'none',
      '<= 1.0',
    );
    report.add(
      `worker resident memory at ${s.turns.toLocaleString('en')} streaming turns`,
      s.workerRssMb,
      'MB',
      'none',
      '<= 1,536 MB',
    );
    report.add('stream deltas received/s over the websocket', s.deltasPerSecond, 'deltas/s', 'none');
    report.add(
      `api CPU cores at ${s.turns.toLocaleString('en')} streaming turns (one websocket follows all)`,
      s.apiCores,
      'cores',
      'none',
    );
    report.add('job row writes per 10-s streaming turn', s.rowWritesPerTurn, 'writes', 'none');
  }

  await printStatements(db, 'fairness');
  if (only('websocket')) {
    // (e) job finished -> websocket message; baseline: raw NOTIFY -> LISTEN.
    const notify = await rawNotifyLatency(ctx, samples);
    const ws = await websocketLatency(ctx, config, samples);
    report.add('job finished -> websocket p50', ws.p50, 'ms', { name: 'NOTIFY p50', value: notify.p50 });
    report.add('job finished -> websocket p99', ws.p99, 'ms', { name: 'NOTIFY p99', value: notify.p99 }, '<= 25 ms');
  }

  await printStatements(db, 'websocket');
  if (only('chat')) {
    // (f) Chat: sends accepted over HTTP, and send -> first progress -> final.
    await resetQueues(ctx);
    const chat = await chatFigures(ctx, config, Math.min(samples, 200));
    // Each send phase against raw inserts measured just before and after it (the start-of-run figure is minutes old by then).
    for (const [phase, which, sends, raw] of [
      ['1 session', '1-session', chat.acceptedPerSecond, chat.rawAround.oneSession],
      ['32 sessions', '32-session', chat.acceptedPerSecondManySessions, chat.rawAround.manySessions],
    ] as const) {
      report.add(`raw insert/s, 32 connections, just before the ${which} sends`, raw.before, 'ops/s');
      report.add(`raw insert/s, 32 connections, just after the ${which} sends`, raw.after, 'ops/s');
      report.add(
        `chat sends accepted/s (HTTP, 32 clients, ${phase})`,
        sends,
        'req/s',
        { name: 'raw 32c mean around', value: (raw.before + raw.after) / 2 },
        '>= 0.40x',
      );
    }
    // CPU per send in the 32-session phase (the api runs in this process); per raw insert just before it.
    report.add('CPU per raw insert: PostgreSQL server', chat.cpu.rawInsert.postgres ?? Number.NaN, 'µs');
    report.add('CPU per raw insert: client (bench process)', chat.cpu.rawInsert.process, 'µs');
    report.add(
      'CPU per chat send (32 sessions): PostgreSQL server',
      chat.cpu.send.postgres ?? Number.NaN,
      'µs',
      chat.cpu.rawInsert.postgres === null ? undefined : { name: 'per raw insert', value: chat.cpu.rawInsert.postgres },
    );
    report.add('CPU per chat send (32 sessions): api process', chat.cpu.send.process, 'µs');
    report.add('chat send -> first progress p50', chat.firstProgress.p50, 'ms');
    report.add('chat send -> final websocket p50', chat.final.p50, 'ms', undefined, '< 20 ms');
    report.add('chat send -> final websocket p99', chat.final.p99, 'ms', undefined, '<= 40 ms');
    report.add('chat follow-up in a session: first final -> second final p50', chat.followUp.p50, 'ms');
    report.add('chat follow-up in a session: first final -> second final p99', chat.followUp.p99, 'ms');
    // Where that time goes: 202 received, worker pickup, the task (to its final commit), NOTIFY to the socket.
    for (const [part, name] of [
      ['accepted', 'send -> 202'],
      ['pickedUp', '202 -> worker pickup'],
      ['ran', 'pickup -> task done'],
      ['delivered', 'task done -> final websocket'],
    ] as const) {
      report.add(`chat part: ${name} p50`, chat.parts[part].p50, 'ms');
      report.add(`chat part: ${name} p99`, chat.parts[part].p99, 'ms');
    }
  }

  await printStatements(db, 'chat');
  if (only('http')) {
    // (g) HTTP: token exchanges and authenticated Agent API reads vs a bare route.
    const web = await httpFigures(ctx, config);
    const bareBase = { name: 'bare fastify route', value: web.bare };
    report.add('bare fastify GET (16 connections)', web.bare, 'req/s');
    report.add('token exchanges (JWT-bearer grant)', web.exchanges, 'req/s', bareBase);
    report.add('authenticated GET /api/agent/v1/me', web.me, 'req/s', bareBase, '>= 0.40x');
    report.add('MCP tools/call getAgentMe (same operation at /mcp)', web.mcp, 'req/s', {
      name: 'GET /api/agent/v1/me',
      value: web.me,
    });
  }

  await printStatements(db, 'http');
  if (only('billing')) {
    // (h) Stripe webhooks: accepted/s over HTTP, and event received -> plan changed.
    await resetQueues(ctx);
    const billing = await billingFigures(ctx, benchEnv, Math.min(samples, 100));
    report.add(
      'stripe webhook events accepted/s (signature, stored, job; 32 clients)',
      billing.acceptedPerSecond,
      'req/s',
      rawBase,
    );
    report.add('webhook received -> plan changed p50', billing.planChanged.p50, 'ms');
    report.add('webhook received -> plan changed p99', billing.planChanged.p99, 'ms');
  }

  await printStatements(db, 'billing');
  if (only('channels')) {
    // (i) Channels: signed inbound messages accepted/s; 1,000 link/wait waiters woken by one link.
    await resetQueues(ctx);
    const ch = await channelFigures(ctx, config);
    report.add(
      'channel inbound messages accepted/s (signature, stored, turn enqueued; 32 clients)',
      ch.acceptedPerSecond,
      'req/s',
      rawBase,
    );
    report.add(`link/wait: resident memory added by ${ch.waiters} waiters`, ch.rssAddedMb, 'MB');
    report.add(`link/wait: ${ch.waiters} waiters answered after the link, p50`, ch.wakeP50, 'ms');
    report.add(`link/wait: ${ch.waiters} waiters answered after the link, p99`, ch.wakeP99, 'ms');
    report.add(
      `link/wait: ${ch.waiters} waiters answered after the binding committed (its NOTIFY), p99`,
      ch.afterCommitP99,
      'ms',
      'none',
      '<= 50 ms',
    );
  }

  await printStatements(db, 'channels');
  if (only('scale-out')) {
    // (j) The entries as separate processes on this PostgreSQL: on 2 cores the cost of more processes, not a speed-up.
    const scale = await scaleOutFigures(ctx, benchEnv);
    report.add('scale-out: no-op jobs/s, 2 worker processes (8 each)', scale.jobs.two, 'jobs/s', {
      name: '1 worker process',
      value: scale.jobs.one,
    });
    report.add('scale-out: chat sends/s, 2 api processes (32 clients)', scale.sends.two, 'req/s', {
      name: '1 api process',
      value: scale.sends.one,
    });
  }
  if (only('runtime')) {
    // (l) Process start: the api through tsx (the npm scripts) and compiled (npm run build, production).
    const starts = await startFigures(benchEnv);
    report.add('process start: api compiled, spawn to ready', starts.compiled.seconds, 's', {
      name: 'through tsx',
      value: starts.tsx.seconds,
    });
    report.add('process start: api compiled, CPU to ready', starts.compiled.cpuSeconds, 's', {
      name: 'through tsx',
      value: starts.tsx.cpuSeconds,
    });
    report.add('process start: api compiled, resident memory when ready', starts.compiled.rssMb, 'MB', {
      name: 'through tsx',
      value: starts.tsx.rssMb,
    });
  }
  const scaleFactor = Number(process.env.BENCH_SCALE ?? 0);
  if (scaleFactor > 0) {
    // (k) The scale model, last: it leaves the database full.
    const empty = await scaleFigures(ctx, config, Math.min(samples, 200));
    const seeded = await seedScale(ctx, scaleFactor);
    process.stderr.write(
      `bench: seeded ${Object.entries(seeded.rows)
        .map(([t, n]) => `${n.toLocaleString('en-US')} ${t}`)
        .join(', ')} in ${seeded.seconds.toFixed(0)} s\n`,
    );
    const full = await scaleFigures(ctx, config, Math.min(samples, 200));
    for (const figure of SCALE_FIGURES) {
      report.add(
        `scale model: ${figure}, p50`,
        full[figure],
        'ms',
        { name: 'nearly empty database', value: empty[figure] },
        '<= 1.25x',
      );
    }
  }
  await printStatements(db, 'the last section');
  await db.end();
  console.log(
    `\nbench on ${process.platform}/${process.arch}, node ${process.version}, PostgreSQL 18 embedded, ${(await import('node:os')).cpus().length} cores\n`,
  );
  report.print();
} finally {
  await database.stop();
  rmSync(scratch, { recursive: true, force: true });
}
