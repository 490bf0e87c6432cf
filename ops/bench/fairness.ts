// Fairness with one noisy tenant: a backlog of its jobs fills the queue, then
// a quiet tenant enqueues a few jobs at once; how long until each starts?
// Measured with the per-tenant cap (WORKER_TENANT_CONCURRENCY) and, as the
// baseline in the same run, with the cap off (every slot open to one tenant).
import { EventEmitter } from 'node:events';
import { loadConfig, type Config } from '../../core/config.ts';
import { sql } from '../../core/db/pool.ts';
import { enqueueJobs } from '../../core/jobs/enqueue.ts';
import { startWorker } from '../../workers/worker.ts';
import { sleep } from './measure.ts';
import { resetQueues, summarize, type BenchContext, type Latencies } from './scenarios.ts';

const BACKLOG = 160;
const STEP_MS = 200;
const QUIET_JOBS = 8;

async function quietStartLatency(ctx: BenchContext, config: Config, noisyTenant: string, quietTenant: string): Promise<Latencies> {
  await resetQueues(ctx);
  await ctx.db.transaction((tx) =>
    enqueueJobs(tx, Array.from({ length: BACKLOG }, () => ({ kind: 'diag.steps', tenantId: noisyTenant, input: { steps: 1, delayMs: STEP_MS } }))));
  const worker = await startWorker({ config, databaseUrl: ctx.url, logger: ctx.logger });
  const events = worker.events as unknown as EventEmitter;
  // The backlog is running in every slot it may take before the quiet tenant arrives.
  await sleep(STEP_MS * 2);
  const started = new Map<string, number>();
  const onStart = ({ job }: { job: { payload: unknown } }) => {
    const jobId = (job.payload as { jobId?: string }).jobId;
    if (jobId) started.set(jobId, performance.now());
  };
  events.on('job:start', onStart);
  const enqueuedAt = performance.now();
  const quiet = await ctx.db.transaction((tx) => enqueueJobs(tx, Array.from({ length: QUIET_JOBS }, () => ({ kind: 'diag.noop', tenantId: quietTenant }))));
  while (quiet.some((j) => !started.has(j.id))) await sleep(5);
  events.off('job:start', onStart);
  await worker.stop();
  return summarize(quiet.map((j) => started.get(j.id)! - enqueuedAt));
}

export async function fairnessFigures(ctx: BenchContext, env: Record<string, string>): Promise<{ capped: Latencies; uncapped: Latencies; cap: number }> {
  const tenant = (name: string) => ctx.db.oneFirst(sql.unsafe`insert into tenants (name) values (${name}) returning id`) as Promise<string>;
  const noisy = await tenant('bench noisy');
  const quiet = await tenant('bench quiet');
  const capped = loadConfig(env);
  const uncapped = loadConfig({ ...env, WORKER_TENANT_CONCURRENCY: env.WORKER_CONCURRENCY ?? '8' });
  return {
    cap: 0,
    capped: await quietStartLatency(ctx, capped, noisy, quiet),
    uncapped: await quietStartLatency(ctx, uncapped, noisy, quiet),
  };
}
