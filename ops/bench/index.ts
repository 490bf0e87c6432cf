// `npm run bench`: one embedded PostgreSQL, every figure next to a baseline
// measured in the same run. Prints a table; nothing here is pass/fail.
//   BENCH_SECONDS   duration of each throughput phase (default 4)
//   BENCH_SAMPLES   latency samples per figure (default 300)
//   BENCH_ONLY      comma list of sections to run: jobs, peers, fairness, streaming, websocket, chat, http, billing,
//                   channels, scale-out, runtime, cost (default all; the raw-insert baseline always runs)
//   BENCH_STREAM_TURNS  concurrent streaming turns in the streaming section (default 1000)
//   BENCH_STATEMENTS=1  print each section's most expensive SQL statements (pg_stat_statements)
//   BENCH_PROFILE=<dir>  write a CPU profile of the api during the chat send phase (32 sessions) there
//   BENCH_SCALE=<factor>  last, the scale model: request figures before and after seeding factor x
//                   (10M finished jobs, 2M messages, 10k tenants, 100k sessions, 1M usage records)
import { mkdtempSync, rmSync, chmodSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadConfig } from '../../core/config.ts';
import { migrate } from '../../core/db/migrate.ts';
import { createDatabasePool, sql } from '../../core/db/pool.ts';
import { createLogger } from '../../core/logger.ts';
import { commandLine } from '../../core/process/command-line.ts';
import { startEmbeddedPostgres } from '../embedded-postgres.ts';
import { costSection } from './cost.ts';
import { Report } from './measure.ts';
import {
  billingSection,
  channelsSection,
  chatSection,
  fairnessSection,
  httpSection,
  runtimeSection,
  scaleModelSection,
  scaleOutSection,
  streamingSection,
  websocketSection,
} from './platform-sections.ts';
import { jobsSection, peersSection } from './queue-sections.ts';
import { rawInserts, type BenchContext, type BenchRun } from './scenarios.ts';
import { printStatements, startStatements, statementSettings } from './statements.ts';

commandLine(
  `
usage: npm run bench
Prints speed figures as ratios against baselines measured in the same run, on
a scratch embedded PostgreSQL. BENCH_ONLY=jobs,peers,fairness,streaming,
websocket,chat,http,billing,channels,scale-out,runtime,cost picks sections; BENCH_SECONDS,
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
    | 'runtime'
    | 'cost',
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

  const bench: BenchRun = { ctx, config, benchEnv, report, samples, rawBase };
  let ourNoop: number | null = null;

  await printStatements(db, 'baseline');
  if (only('jobs')) ourNoop = await jobsSection(bench);
  await printStatements(db, 'jobs');
  if (only('peers')) await peersSection(bench, ourNoop);
  await printStatements(db, 'peers');
  if (only('fairness')) await fairnessSection(bench);
  await printStatements(db, 'fairness');
  if (only('streaming')) await streamingSection(bench, streamTurns);
  await printStatements(db, 'streaming');
  if (only('websocket')) await websocketSection(bench);
  await printStatements(db, 'websocket');
  if (only('chat')) await chatSection(bench);
  await printStatements(db, 'chat');
  if (only('http')) await httpSection(bench);
  await printStatements(db, 'http');
  if (only('billing')) await billingSection(bench);
  await printStatements(db, 'billing');
  if (only('channels')) await channelsSection(bench);
  await printStatements(db, 'channels');
  if (only('cost')) await costSection(bench);
  await printStatements(db, 'cost');
  if (only('scale-out')) await scaleOutSection(bench);
  if (only('runtime')) await runtimeSection(bench);
  const scaleFactor = Number(process.env.BENCH_SCALE ?? 0);
  if (scaleFactor > 0) await scaleModelSection(bench, scaleFactor);
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
