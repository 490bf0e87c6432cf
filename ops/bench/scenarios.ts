// What the bench measures. Each figure has a baseline measured in the same
// run on the same database: raw PostgreSQL inserts, raw Graphile Worker, raw
// LISTEN/NOTIFY. Our code is then compared against what it is built on.
import { randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { run, type WorkerEvents } from 'graphile-worker';
import pg from 'pg';
import type { Logger } from 'pino';
import type { Config } from '../../core/config.ts';
import type { DatabasePool } from '../../core/db/pool.ts';
import { sql } from '../../core/db/pool.ts';
import { enqueueJob, enqueueJobs, type JobSpec } from '../../core/jobs/enqueue.ts';
import { COUNT_FOLD_MS, keepFoldingAccountCounts } from '../../core/jobs/counts.ts';
import { GroupCommitter } from '../../core/jobs/group-commit.ts';
import { graphileLogger } from '../../core/graphile-logger.ts';
import { percentile, sleep, throughput, type Report, type Throughput } from './measure.ts';

export type BenchContext = { url: string; db: DatabasePool; logger: Logger; seconds: number; tenantId: string };

/** What each section of `npm run bench` reports with: the run's settings, table and raw-insert baseline. */
export type BenchRun = {
  ctx: BenchContext;
  config: Config;
  benchEnv: Record<string, string>;
  report: Report;
  samples: number;
  rawBase: { name: string; value: number };
};

export async function resetQueues(ctx: BenchContext): Promise<void> {
  // Bench-only: empty both queues between phases so one phase's backlog does
  // not slow the next.
  await truncateQueues(ctx.db, true);
}

/**
 * Empties the queues between phases, no worker running: the platform's jobs
 * (and the accounts' counts of unfinished jobs with them: truncate fires no
 * triggers), and Graphile Worker's jobs by its own functions.
 */
export async function truncateQueues(db: DatabasePool, raw = false): Promise<void> {
  await db.query(sql.unsafe`truncate jobs, account_job_counts, account_job_count_changes cascade`);
  await db.query(
    sql.unsafe`select graphile_worker.force_unlock_workers(array(select distinct locked_by from graphile_worker.jobs where locked_by is not null))`,
  );
  await db.query(sql.unsafe`select graphile_worker.complete_jobs(array(select id from graphile_worker.jobs))`);
  if (raw) await db.query(sql.unsafe`truncate bench_raw`);
}

export async function rawInserts(ctx: BenchContext, connections: number): Promise<Throughput> {
  const pool = new pg.Pool({ connectionString: ctx.url, max: connections });
  try {
    const payload = JSON.stringify({ kind: 'bench', input: { a: 1, b: 'two' } });
    return await throughput(connections, ctx.seconds, async () => {
      await pool.query('insert into bench_raw (payload) values ($1)', [payload]);
    });
  } finally {
    await pool.end();
  }
}

export async function rawAddJob(ctx: BenchContext, connections: number): Promise<Throughput> {
  const pool = new pg.Pool({ connectionString: ctx.url, max: connections });
  try {
    const payload = JSON.stringify({ input: { a: 1, b: 'two' } });
    return await throughput(connections, ctx.seconds, async () => {
      await pool.query(`select graphile_worker.add_job('bench.noop', $1::json)`, [payload]);
    });
  } finally {
    await pool.end();
  }
}

const spec = (ctx: BenchContext): JobSpec => ({ kind: 'diag.noop', tenantId: ctx.tenantId, input: { a: 1, b: 'two' } });

/** One transaction per request: what a naive route would do. */
export async function enqueueUngrouped(ctx: BenchContext, callers: number, pool: DatabasePool): Promise<Throughput> {
  return foldingAsTheApiDoes(ctx, () =>
    throughput(callers, ctx.seconds, async () => {
      await pool.transaction((tx) => enqueueJob(tx, spec(ctx)));
    }),
  );
}

/** Through the group committer, as the api does. */
export async function enqueueGrouped(ctx: BenchContext, callers: number, pool: DatabasePool): Promise<Throughput> {
  const committer = new GroupCommitter(pool, { logger: ctx.logger });
  return foldingAsTheApiDoes(ctx, () =>
    throughput(callers, ctx.seconds, async () => {
      await committer.enqueue([spec(ctx)]);
    }),
  );
}

/** An api folds its accounts' job counts while it enqueues (core/jobs/counts.ts); so does the bench in its place. */
async function foldingAsTheApiDoes<T>(ctx: BenchContext, phase: () => Promise<T>): Promise<T> {
  const stop = keepFoldingAccountCounts(ctx.db, ctx.logger, COUNT_FOLD_MS);
  try {
    return await phase();
  } finally {
    stop();
  }
}

/**
 * A plain Graphile Worker runner of `bench.noop` jobs, the baseline of our
 * worker: with its defaults, or (`batched`) with its local queue of 64 and
 * batched completions.
 */
export function graphileNoopRunner(ctx: BenchContext, concurrency: number, batched: boolean, events?: WorkerEvents) {
  return run({
    connectionString: ctx.url,
    concurrency,
    noHandleSignals: true,
    pollInterval: 1000,
    taskList: { 'bench.noop': async () => undefined },
    logger: graphileLogger(ctx.logger),
    ...(events ? { events } : {}),
    ...(batched
      ? { preset: { worker: { localQueue: { size: 64 }, completeJobBatchDelay: 0, failJobBatchDelay: 0 } } }
      : {}),
  });
}

/**
 * Drains `count` no-op jobs with a plain Graphile Worker runner: with its
 * defaults, or (`batched`) with its local queue of 64 and batched completions.
 */
export async function rawExecuted(
  ctx: BenchContext,
  count: number,
  concurrency: number,
  batched = false,
): Promise<number> {
  const client = new pg.Client({ connectionString: ctx.url });
  await client.connect();
  await client.query(
    `select graphile_worker.add_jobs(array(select ('bench.noop', '{}'::json, null, null, null, null, null, null)::graphile_worker.job_spec from generate_series(1, $1)))`,
    [count],
  );
  await client.end();
  const events: WorkerEvents = new EventEmitter() as WorkerEvents;
  let done = 0;
  let finished!: () => void;
  const allDone = new Promise<void>((r) => (finished = r));
  events.on('job:success', () => ++done === count && finished());
  const started = performance.now();
  const runner = await graphileNoopRunner(ctx, concurrency, batched, events);
  await allDone;
  const seconds = (performance.now() - started) / 1000;
  await runner.stop();
  return count / seconds;
}

/** Enqueues `count` jobs at once for our worker to drain (see index.ts); unfair: at now(), outside the fair order (priority -1, as the platform's own). */
export async function enqueueBacklog(ctx: BenchContext, count: number, fair = true): Promise<void> {
  const runAt = fair ? undefined : new Date();
  await ctx.db.transaction((tx) =>
    enqueueJobs(
      tx,
      Array.from({ length: count }, () => ({ ...spec(ctx), ...(runAt ? { runAt } : {}) })),
    ),
  );
}

export type Latencies = { p50: number; p95: number; p99: number };
export const summarize = (samples: number[]): Latencies => ({
  p50: percentile(samples, 50),
  p95: percentile(samples, 95),
  p99: percentile(samples, 99),
});

/**
 * Enqueue -> task start, one job at a time against an idle worker. `enqueue`
 * returns the job's identity once its commit returned; `events` reports starts.
 */
export async function startLatency(
  samples: number,
  events: WorkerEvents,
  identify: (payload: unknown) => string | undefined,
  enqueue: () => Promise<string>,
): Promise<Latencies> {
  const waiting = new Map<string, (at: number) => void>();
  const early = new Map<string, number>();
  const onStart = ({ job }: { job: { payload: unknown } }) => {
    const at = performance.now();
    const id = identify(job.payload);
    if (!id) return;
    const resolve = waiting.get(id);
    if (resolve) resolve(at);
    else early.set(id, at);
  };
  events.on('job:start', onStart);
  const results: number[] = [];
  try {
    for (let i = 0; i < samples; i++) {
      const sent = performance.now();
      const id = await enqueue();
      const started = early.get(id) ?? (await new Promise<number>((resolve) => waiting.set(id, resolve)));
      waiting.delete(id);
      early.delete(id);
      // From the moment the enqueue is sent: the start can be seen here before
      // the commit's reply is processed, so the commit's return is no clock.
      results.push(started - sent);
      await sleep(2);
    }
  } finally {
    events.off('job:start', onStart);
  }
  return summarize(results);
}

/** Raw LISTEN/NOTIFY: commit of pg_notify -> notification received. */
export async function rawNotifyLatency(ctx: BenchContext, samples: number): Promise<Latencies> {
  const listener = new pg.Client({ connectionString: ctx.url });
  const sender = new pg.Client({ connectionString: ctx.url });
  await Promise.all([listener.connect(), sender.connect()]);
  await listener.query('listen bench_events');
  const waiting = new Map<string, (at: number) => void>();
  listener.on('notification', (m) => waiting.get(m.payload ?? '')?.(performance.now()));
  const results: number[] = [];
  for (let i = 0; i < samples; i++) {
    const id = randomUUID();
    const received = new Promise<number>((resolve) => waiting.set(id, resolve));
    const sent = performance.now();
    await sender.query('select pg_notify($1, $2)', ['bench_events', id]);
    results.push((await received) - sent);
    waiting.delete(id);
    await sleep(2);
  }
  await Promise.all([listener.end(), sender.end()]);
  return summarize(results);
}
