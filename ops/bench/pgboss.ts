// A peer on the same PostgreSQL: pg-boss (npm), with the same no-op job and
// the same concurrency as our worker. Enqueue/s from 32 callers, a backlog
// drained by 8 workers (one job each at a time), and enqueue -> start with an
// idle worker (pg-boss polls; it has no LISTEN/NOTIFY wake-up).
import PgBoss from 'pg-boss';
import { sleep, throughput, type Throughput } from './measure.ts';
import { summarize, type BenchContext, type Latencies } from './scenarios.ts';

const QUEUE = 'bench-noop';

export type PgBossFigures = { enqueue: Throughput; executedPerSecond: number; start: Latencies };

export async function pgBossFigures(ctx: BenchContext, samples: number, concurrency: number): Promise<PgBossFigures> {
  const boss = new PgBoss({ connectionString: ctx.url, max: 34, supervise: false, schedule: false, migrate: true });
  boss.on('error', (error) => ctx.logger.warn({ err: error }, 'pg-boss error'));
  await boss.start();
  try {
    await boss.createQueue(QUEUE);
    const enqueue = await throughput(32, ctx.seconds, async () => {
      await boss.send(QUEUE, { a: 1, b: 'two' });
    });
    await boss.purgeQueue(QUEUE);

    // A backlog of 5,000, then `concurrency` workers drain it.
    const count = 5_000;
    await boss.insert(Array.from({ length: count }, () => ({ name: QUEUE, data: { a: 1 } })));
    let done = 0;
    let finished!: () => void;
    const allDone = new Promise<void>((r) => (finished = r));
    const t0 = performance.now();
    for (let i = 0; i < concurrency; i++) {
      await boss.work(QUEUE, { batchSize: 1, pollingIntervalSeconds: 0.5 }, async () => {
        if (++done === count) finished();
      });
    }
    await allDone;
    const executedPerSecond = count / ((performance.now() - t0) / 1000);
    await boss.offWork(QUEUE);

    // Enqueue -> start, one job at a time against an idle worker.
    const startedAt = new Map<string, number>();
    await boss.work(QUEUE, { batchSize: 1, pollingIntervalSeconds: 0.5 }, async ([job]) => {
      startedAt.set(job!.id, performance.now());
    });
    const latencies: number[] = [];
    for (let i = 0; i < Math.min(samples, 60); i++) {
      const t = performance.now();
      const id = (await boss.send(QUEUE, { i }))!;
      while (!startedAt.has(id)) await sleep(1);
      latencies.push(startedAt.get(id)! - t);
    }
    await boss.offWork(QUEUE);
    return { enqueue, executedPerSecond, start: summarize(latencies) };
  } finally {
    await boss.stop({ graceful: false, wait: true }).catch(() => undefined);
  }
}
