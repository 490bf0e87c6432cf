// startWorker: a Graphile Worker runner with our tasks and cron items, its
// logs through pino, a heartbeat per worker id, and an orderly stop. Used by
// workers/runner.ts (the worker process), ops/start.ts (all-in-one), the
// tests and the bench.
import { EventEmitter } from 'node:events';
import { parseCronItems, run, type Runner, type TaskList, type WorkerEvents } from 'graphile-worker';
import type { Logger } from 'pino';
import type { Config } from '../core/config.ts';
import { createDatabasePool, type DatabasePool } from '../core/db/pool.ts';
import { graphileLogger } from '../core/graphile-logger.ts';
import { beatHeart, forgetWorkers } from '../core/jobs/liveness.ts';
import { CRON_ITEMS } from '../schedules/index.ts';
import { scheduleDeadWorkerSweep } from './tasks/maintenance-dead-workers.ts';
import { TASKS } from './tasks/index.ts';

export type RunningWorker = {
  runner: Runner;
  /** Graphile Worker's events (job:start, job:success, ...), for tests and the bench. */
  events: WorkerEvents;
  db: DatabasePool;
  workerIds: () => string[];
  /** Lets running jobs finish (up to the shutdown timeout), then releases what is left. */
  stop: () => Promise<void>;
};

export type WorkerOptions = { config: Config; databaseUrl: string; logger: Logger; concurrency?: number };

export async function startWorker({ config, databaseUrl, logger, concurrency }: WorkerOptions): Promise<RunningWorker> {
  const db = await createDatabasePool(databaseUrl, { maximumPoolSize: Math.max(2, (concurrency ?? config.worker.concurrency) + 1) });
  const deps = { db, config, logger };
  const taskList: TaskList = Object.fromEntries(TASKS.map((t) => [t.kind, t.build(deps)]));

  const events: WorkerEvents = new EventEmitter() as WorkerEvents;
  const workerIds = new Set<string>();
  let poolId = 'unknown';
  // Graphile Worker 0.17 locks jobs under the pool id as well as worker ids:
  // both must heartbeat or the sweep would release a live pool's jobs.
  events.on('pool:create', ({ workerPool }) => {
    poolId = workerPool.id;
    workerIds.add(poolId);
  });
  events.on('worker:create', ({ worker }) => {
    workerIds.add(worker.workerId);
    beatHeart(db, poolId, [worker.workerId]).catch((error) => logger.warn({ err: error }, 'heartbeat failed'));
  });
  events.on('worker:stop', ({ worker }) => workerIds.delete(worker.workerId));
  events.on('pool:release', ({ workerPool }) => workerIds.delete(workerPool.id));

  const runner = await run({
    connectionString: databaseUrl,
    concurrency: concurrency ?? config.worker.concurrency,
    pollInterval: config.worker.pollIntervalMs,
    maxPoolSize: (concurrency ?? config.worker.concurrency) + 2,
    noHandleSignals: true,
    taskList,
    parsedCronItems: parseCronItems(CRON_ITEMS),
    logger: graphileLogger(logger.child({ component: 'graphile-worker' })),
    events,
    gracefulShutdownAbortTimeout: Math.max(1000, config.shutdownTimeoutMs - 1000),
  });

  const heartbeat = setInterval(() => {
    beatHeart(db, poolId, [...workerIds]).catch((error) => logger.warn({ err: error }, 'heartbeat failed'));
  }, config.worker.heartbeatMs);
  heartbeat.unref();

  // Start the dead-worker sweep chain now rather than at the next cron minute.
  await scheduleDeadWorkerSweep(db, 0, true);
  logger.info({ concurrency: concurrency ?? config.worker.concurrency, tasks: Object.keys(taskList) }, 'worker started');

  let stopping: Promise<void> | null = null;
  const stop = () =>
    (stopping ??= (async () => {
      const ids = [...workerIds];
      const timer = new Promise<'timeout'>((resolve) => setTimeout(resolve, config.shutdownTimeoutMs, 'timeout').unref());
      const outcome = await Promise.race([runner.stop().then(() => 'stopped' as const), timer]);
      if (outcome === 'timeout') {
        logger.warn('worker: jobs still running at the shutdown timeout; releasing them for another worker');
        await runner.kill().catch((error) => logger.error({ err: error }, 'worker: forceful stop failed'));
      }
      clearInterval(heartbeat);
      await forgetWorkers(db, ids).catch(() => undefined);
      await db.end();
      logger.info('worker stopped');
    })());

  return { runner, events, db, workerIds: () => [...workerIds], stop };
}
