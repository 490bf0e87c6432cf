// startWorker: a Graphile Worker runner with our tasks and cron items, its
// logs through pino, a heartbeat per worker id, per-tenant fairness,
// cancellation of running jobs, and an orderly stop. Used by
// workers/runner.ts (the worker process), ops/start.ts (all-in-one), the
// tests and the bench.
//
// Database outages: Graphile runs on a pool that waits for PostgreSQL to come
// back (graphile-pool.ts). A job release that still failed (its connection
// broke mid-statement) leaves the job locked by this live pool; when that is
// reported (core/process/lifecycle.ts), or the runner ends by itself, the
// worker starts a new Graphile pool and gives the old pool's leftover jobs
// back to the queue once its handlers have stopped, so they run again.
import { EventEmitter } from 'node:events';
import { parseCronItems, run, type Runner, type TaskList, type WorkerEvents } from 'graphile-worker';
import type { Logger } from 'pino';
import type { Config } from '../core/config.ts';
import { createDatabasePool, type DatabasePool } from '../core/db/pool.ts';
import { graphileLogger } from '../core/graphile-logger.ts';
import { createMetricsRegistry, registerWorkerMetrics, type Registry } from '../core/metrics.ts';
import { JobCompletions } from '../core/jobs/completions.ts';
import { beatHeart, forgetWorkers, releaseWorkerJobs } from '../core/jobs/liveness.ts';
import { onLostDatabaseWork, reportLostDatabaseWork } from '../core/process/lifecycle.ts';
import { CRON_ITEMS } from '../schedules/index.ts';
import { CancelListener } from './cancellation.ts';
import { PatientPool } from './graphile-pool.ts';
import { keepQueuesSerial } from './serial-batches.ts';
import { scheduleDeadWorkerSweep } from './tasks/maintenance-dead-workers.ts';
import { TASKS } from './tasks/index.ts';
import { TenantGate, tenantOfJob } from './tenant-gate.ts';

export type RunningWorker = {
  /** The current Graphile runner (a new one after a recovery). */
  readonly runner: Runner;
  /** Graphile Worker's events (job:start, job:success, ...), for tests and the bench. */
  events: WorkerEvents;
  /** platform_job_duration_seconds of this worker (process entries serve it on METRICS_PORT). */
  metrics: Registry;
  db: DatabasePool;
  workerIds: () => string[];
  /** Jobs running per tenant in this process (fairness), for tests. */
  tenantLoad: () => Record<string, number>;
  /** Lets running jobs finish (up to the shutdown timeout), then releases what is left. */
  stop: () => Promise<void>;
};

export type WorkerOptions = { config: Config; databaseUrl: string; logger: Logger; concurrency?: number };

/** One Graphile pool and what belongs to it. */
type Generation = { runner: Runner; poolId: string; ids: Set<string>; gate: TenantGate | null; retired: boolean };

export async function startWorker({ config, databaseUrl, logger, concurrency }: WorkerOptions): Promise<RunningWorker> {
  const size = concurrency ?? config.worker.concurrency;
  const tenantCap = Math.min(size, config.worker.tenantConcurrency);
  // With fairness off, jobs are fetched in batches (localQueue): one
  // statement picks up many. Per-tenant fairness needs a decision per job (a
  // batch could hold more of one tenant's jobs than its cap), so with it on
  // every worker fetches one job at a time.
  const fair = tenantCap < size;
  const batched = !fair && size >= 2;
  const db = await createDatabasePool(databaseUrl, { maximumPoolSize: Math.max(2, size + 1) });
  const graphilePool = new PatientPool({ connectionString: databaseUrl, max: size + 2, application_name: 'worker-graphile' }, logger.child({ component: 'graphile-pool' }));
  const cancels = new CancelListener(databaseUrl, db, logger.child({ component: 'job-cancel' }));
  await cancels.start();
  const events: WorkerEvents = new EventEmitter() as WorkerEvents;
  const metrics = createMetricsRegistry();
  const jobTimes = registerWorkerMetrics(metrics, events);
  // Attempt starts and results (core/jobs/completions.ts): two connections, asynchronous commit.
  const completionPool = new PatientPool(
    { connectionString: databaseUrl, max: 2, application_name: 'worker-completions', options: '-c synchronous_commit=off' },
    logger.child({ component: 'completion-pool' }),
    'completion pool',
  );
  const completions = new JobCompletions(completionPool, logger.child({ component: 'job-completions' }));
  const deps = { db, config, logger, cancels, completions, refused: jobTimes.refused };
  const taskList: TaskList = Object.fromEntries(TASKS.map((t) => [t.kind, t.build(deps)]));
  let stopping = false;

  const startGeneration = async (): Promise<Generation> => {
    // Each generation has its own emitter (to know which ids are its own)
    // that forwards everything to the public one.
    const own = new EventEmitter();
    const forward = own.emit.bind(own);
    own.emit = (name: string | symbol, ...args: unknown[]) => {
      const heard = forward(name, ...args);
      return events.emit(name as never, ...(args as [never])) || heard;
    };
    const generation: Generation = { runner: null as unknown as Runner, poolId: 'unknown', ids: new Set(), gate: fair ? new TenantGate(tenantCap) : null, retired: false };
    const { ids, gate } = generation;
    // Graphile 0.17 locks jobs under the pool id as well as worker ids: both
    // must heartbeat or the sweep would release a live pool's jobs.
    own.on('pool:create', ({ workerPool }: { workerPool: { id: string } }) => {
      generation.poolId = workerPool.id;
      ids.add(workerPool.id);
    });
    own.on('worker:create', ({ worker }: { worker: { workerId: string } }) => {
      ids.add(worker.workerId);
      beatHeart(db, generation.poolId, [worker.workerId]).catch((error) => logger.debug({ err: error }, 'heartbeat failed'));
    });
    if (batched) keepQueuesSerial(own as WorkerEvents, graphilePool, logger.child({ component: 'graphile-batches' }), reportLostDatabaseWork);
    if (gate) {
      own.on('job:start', ({ job }: { job: { payload: unknown } }) => gate.fetched(tenantOfJob(job)));
      own.on('worker:getJob:empty', () => gate.fetched(null));
      own.on('worker:getJob:error', () => gate.fetched(null));
      own.on('job:complete', ({ job }: { job: { payload: unknown } }) => gate.finished(tenantOfJob(job)));
    }
    generation.runner = await run({
      pgPool: graphilePool,
      concurrency: size,
      pollInterval: config.worker.pollIntervalMs,
      noHandleSignals: true,
      taskList,
      parsedCronItems: parseCronItems(CRON_ITEMS),
      logger: graphileLogger(logger.child({ component: 'graphile-worker' })),
      events: own as WorkerEvents,
      gracefulShutdownAbortTimeout: Math.max(1000, config.shutdownTimeoutMs - 1000),
      ...(gate ? { forbiddenFlags: gate.forbiddenFlags } : {}),
      // Graphile's own completions of jobs that finish together go in one
      // statement too. Safe for serial queues (a queue is unlocked when its
      // job's completion commits); localQueue is made safe for them by
      // keepQueuesSerial (serial-batches.ts, graphile/worker#621).
      // A job's result is committed before it is let go, so a crash in the
      // batch's moment only makes a worker skip the finished job later.
      preset: { worker: { completeJobBatchDelay: 0, failJobBatchDelay: 0, ...(batched ? { localQueue: { size } } : {}) } },
    });
    // A runner that ends while we still want it (it gave up on an error) is replaced.
    const ended = (why: string) => {
      if (!stopping && !generation.retired) void recover(why);
    };
    generation.runner.promise.then(
      () => ended('the Graphile runner stopped by itself'),
      (error) => ended(`the Graphile runner failed: ${(error as Error).message}`),
    );
    return generation;
  };

  /** Stops a runner: running jobs may finish, then what is left is released by force. */
  const stopRunner = async (runner: Runner) => {
    const timer = new Promise<'timeout'>((resolve) => setTimeout(resolve, config.shutdownTimeoutMs, 'timeout').unref());
    const outcome = await Promise.race([runner.stop().then(() => 'stopped' as const, () => 'stopped' as const), timer]);
    if (outcome === 'timeout') {
      logger.warn('worker: jobs still running at the shutdown timeout; releasing them for another worker');
      await runner.kill().catch((error) => logger.error({ err: error }, 'worker: forceful stop failed'));
    }
  };

  let current: Generation;
  let recovering: Promise<void> | null = null;
  const recover = (reason: string) =>
    (recovering ??= (async () => {
      const old = current;
      old.retired = true; // its ids stop heart-beating from here on
      logger.warn({ reason }, 'worker: restarting the Graphile pool to recover jobs it may have left locked');
      await stopRunner(old.runner);
      if (stopping) return;
      current = await startGeneration(); // waits for the database
      const oldIds = [...old.ids];
      for (let attempt = 0; !stopping; attempt++) {
        try {
          const requeued = await db.transaction((tx) => releaseWorkerJobs(tx, oldIds));
          await forgetWorkers(db, oldIds);
          logger.info({ requeued }, 'worker: Graphile pool restarted; jobs the old pool left locked are queued again');
          return;
        } catch (error) {
          logger.debug({ err: error, attempt }, 'worker: releasing the old pool\'s jobs failed; retrying');
          await new Promise((resolve) => setTimeout(resolve, Math.min(2_000, 100 * 2 ** attempt)));
        }
      }
    })()
      .catch((error) => logger.error({ err: error }, 'worker: recovery failed'))
      .finally(() => (recovering = null)));
  current = await startGeneration();
  const stopListening = onLostDatabaseWork(() => void recover('a job release failed while the database was away'));

  const heartbeat = setInterval(() => {
    const ids = current.retired ? [] : [...current.ids];
    beatHeart(db, current.poolId, ids).catch((error) => logger.debug({ err: error }, 'heartbeat failed'));
  }, config.worker.heartbeatMs);
  heartbeat.unref();

  // Start the dead-worker sweep chain now rather than at the next cron minute.
  await scheduleDeadWorkerSweep(db, 0, true);
  logger.info({ concurrency: size, tenantConcurrency: tenantCap, batchFetch: batched, tasks: Object.keys(taskList) }, 'worker started');

  let stopped: Promise<void> | null = null;
  const stop = () =>
    (stopped ??= (async () => {
      stopping = true;
      stopListening();
      await recovering;
      const ids = [...current.ids];
      await stopRunner(current.runner);
      clearInterval(heartbeat);
      jobTimes.forget();
      await forgetWorkers(db, ids).catch(() => undefined);
      await cancels.stop();
      await graphilePool.end().catch(() => undefined);
      await completionPool.end().catch(() => undefined);
      // slonik's end() throws when a connection died during an outage: not a failed stop.
      await db.end().catch((error) => logger.debug({ err: error }, 'database pool ended with an error'));
      logger.info('worker stopped');
    })());

  return {
    get runner() {
      return current.runner;
    },
    events,
    metrics,
    db,
    workerIds: () => [...current.ids],
    tenantLoad: () => current.gate?.snapshot() ?? {},
    stop,
  };
}
