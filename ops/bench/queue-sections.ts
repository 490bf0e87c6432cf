// The bench's job-queue sections (BENCH_ONLY jobs, peers): our enqueue and worker against raw Graphile Worker,
// then against pg-boss and BullMQ on the same machine.
import { EventEmitter } from 'node:events';
import { run, type WorkerEvents } from 'graphile-worker';
import pg from 'pg';
import { z } from 'zod';
import { sql } from '../../core/db/pool.ts';
import { GroupCommitter } from '../../core/jobs/group-commit.ts';
import { graphileLogger } from '../../core/graphile-logger.ts';
import { startWorker } from '../../workers/worker.ts';
import { bullmqFigures } from './bullmq.ts';
import { sleep } from './measure.ts';
import { pgBossFigures } from './pgboss.ts';
import {
  enqueueBacklog,
  enqueueGrouped,
  enqueueUngrouped,
  rawAddJob,
  rawExecuted,
  resetQueues,
  startLatency,
  type BenchRun,
} from './scenarios.ts';

type Worker = Awaited<ReturnType<typeof startWorker>>;

/** The jobs section; returns our no-op jobs executed/s (default settings), which the peers section compares with. */
export async function jobsSection(bench: BenchRun): Promise<number> {
  const { rawRun, rawBatched } = await graphileAndEnqueue(bench);
  const { fairRate, worker } = await workerThroughput(bench, rawRun, rawBatched);
  await startLatencies(bench, worker);
  await worker.stop();
  return fairRate;
}

/** (b) raw Graphile Worker, then (c) our enqueue against it. */
async function graphileAndEnqueue({ ctx, report, rawBase }: BenchRun) {
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
  const single = await enqueueUngrouped(ctx, 32, ctx.db);
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
  const grouped = await enqueueGrouped(ctx, 32, ctx.db);
  report.add('our enqueue/s, group commit, 32 callers', grouped.perSecond, 'ops/s', rawBase, '>= 0.50x');
  return { rawRun, rawBatched };
}

/**
 * Our worker draining no-op jobs of one tenant, with status updates and
 * NOTIFY per job: without the fair order (jobs enqueued at now(), as plain
 * Graphile orders them), then as shipped. Counted in the database: the
 * worker starts on the backlog before any event listener could be attached.
 */
async function drain({ ctx, config }: BenchRun, fair: boolean): Promise<{ perSecond: number; drainer: Worker }> {
  await resetQueues(ctx);
  await enqueueBacklog(ctx, 5000, fair);
  const t0 = performance.now();
  const drainer = await startWorker({ config, databaseUrl: ctx.url, logger: ctx.logger });
  // Until no no-op job is open: one probe of the open jobs' index, not a count of every finished one.
  for (;;) {
    const open = await ctx.db.oneFirst(sql.type(z.object({ open: z.boolean() }))`
          select exists (select 1 from jobs where status in ('queued', 'running', 'cancelling') and kind = 'diag.noop') as open`);
    if (!open) break;
    await sleep(20);
  }
  const perSecond = 5000 / ((performance.now() - t0) / 1000);
  return { perSecond, drainer };
}

/** Our worker's no-op throughput, fair order off then on; the last worker keeps running for the latencies. */
async function workerThroughput(bench: BenchRun, rawRun: number, rawBatched: number) {
  const { report } = bench;
  const unfair = await drain(bench, false);
  await unfair.drainer.stop();
  report.add(
    'our no-op jobs executed/s (concurrency 8, tenant cap off)',
    unfair.perSecond,
    'jobs/s',
    { name: 'graphile', value: rawRun },
    '>= 0.60x',
  );
  const { perSecond: fairRate, drainer: worker } = await drain(bench, true);
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
  return { fairRate, worker };
}

/** (d) enqueue -> task start latency; baseline: raw add_job -> start. */
async function startLatencies({ ctx, report, samples }: BenchRun, worker: Worker): Promise<void> {
  const { url, db, logger, tenantId } = ctx;
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
}

/** The peers section; `ourNoop` is the jobs section's figure (null when it did not run). */
export async function peersSection({ ctx, report, samples, rawBase }: BenchRun, ourNoop: number | null): Promise<void> {
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
