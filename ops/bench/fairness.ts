// Fairness by account: a noisy account floods the I/O pool from 4 workspaces
// with jobs that wait on the outside world (diag.wait, 200-600 ms each, as
// model turns vary), more than the slots can hold; meanwhile a quiet account
// enqueues one job at a time. How long until each quiet job starts? With the
// fair order (default) and, as the baseline in the same run, without it
// (every job enqueued at run_at now(): first come, first served). Every slot
// is lent to the flood, so a quiet job waits for the next slot to free: were
// the flood's jobs all of one length and started together, slots would free
// only in waves, one job's length apart.
import { randomUUID } from 'node:crypto';
import type { EventEmitter } from 'node:events';
import { loadConfig } from '../../core/config.ts';
import { sql } from '../../core/db/pool.ts';
import { enqueueJobs, type JobSpec } from '../../core/jobs/enqueue.ts';
import { startWorker } from '../../workers/worker.ts';
import { sleep } from './measure.ts';
import { resetQueues, summarize, type BenchContext, type Latencies } from './scenarios.ts';

const SLOTS = 64;
const FLOOD_PER_WORKSPACE = 100;
const FLOOD_MS = 400;
/** Each flood job lasts FLOOD_MS ± this. */
const FLOOD_SPREAD_MS = 200;
const QUIET_SAMPLES = 40;

async function account(ctx: BenchContext, workspaces: number): Promise<string[]> {
  const userId = randomUUID();
  await ctx.db.query(sql.unsafe`insert into users (id, email) values (${userId}, ${`${userId}@bench.test`})`);
  return Array.from(
    await ctx.db.anyFirst(sql.unsafe`
    insert into tenants (name, created_by, owner_id) select 'bench fairness ' || n, ${userId}, ${userId} from generate_series(1, ${workspaces}) n returning id`),
  ) as string[];
}

async function quietStarts(ctx: BenchContext, env: Record<string, string>, fair: boolean): Promise<Latencies> {
  await resetQueues(ctx);
  const noisy = await account(ctx, 4);
  const [quiet] = await account(ctx, 1);
  // Without fairness every job is enqueued at now(): Graphile's plain first come, first served.
  const at = (spec: JobSpec): JobSpec => (fair ? spec : { ...spec, runAt: new Date() });
  const worker = await startWorker({
    config: loadConfig({ ...env, WORKER_IO_CONCURRENCY: String(SLOTS) }),
    databaseUrl: ctx.url,
    logger: ctx.logger,
  });
  const started = new Map<string, number>();
  (worker.events as unknown as EventEmitter).on('job:start', ({ job }: { job: { payload: unknown } }) => {
    const jobId = (job.payload as { jobId?: string }).jobId;
    if (jobId) started.set(jobId, performance.now());
  });
  try {
    for (const tenantId of noisy) {
      await ctx.db.transaction((tx) =>
        enqueueJobs(
          tx,
          Array.from({ length: FLOOD_PER_WORKSPACE }, () =>
            at({
              kind: 'diag.wait',
              tenantId,
              input: { ms: Math.round(FLOOD_MS - FLOOD_SPREAD_MS + Math.random() * 2 * FLOOD_SPREAD_MS) },
            }),
          ),
        ),
      );
    }
    await sleep(FLOOD_MS); // the flood holds every slot
    const samples: number[] = [];
    for (let i = 0; i < QUIET_SAMPLES; i++) {
      const enqueuedAt = performance.now();
      const [job] = await ctx.db.transaction((tx) =>
        enqueueJobs(tx, [at({ kind: 'diag.wait', tenantId: quiet!, input: { ms: 0 } })]),
      );
      while (!started.has(job!.id)) await sleep(1);
      samples.push(started.get(job!.id)! - enqueuedAt);
      await sleep(20);
    }
    return summarize(samples);
  } finally {
    await worker.stop();
  }
}

export async function fairnessFigures(
  ctx: BenchContext,
  env: Record<string, string>,
): Promise<{ fair: Latencies; fifo: Latencies; slots: number }> {
  return { slots: SLOTS, fair: await quietStarts(ctx, env, true), fifo: await quietStarts(ctx, env, false) };
}
