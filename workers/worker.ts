// startWorker: the Graphile Worker runners of one worker process, with our
// tasks and cron items, logs through pino, a heartbeat per Graphile pool,
// cancellation of running jobs, and an orderly stop. Used by
// workers/runner.ts (the worker process), ops/start.ts (all-in-one), the
// tests and the bench.
//
// Two pools of slots (core/jobs/pools.ts): the short pool runs short and
// CPU-bound work, WORKER_CONCURRENCY at a time; the I/O pool runs the jobs
// that wait on a model or a channel, WORKER_IO_CONCURRENCY at a time. Both
// fetch in batches (Graphile's localQueue) in the fair order the jobs were
// tagged with at enqueue (migration 0037): fairness between accounts is in
// the order, so every slot stays open to whoever is next. The I/O pool
// fetches only as many jobs as it has idle slots, so none waits in a batch
// behind long turns while a slot elsewhere is free.
//
// Database outages: Graphile runs on a pool that waits for PostgreSQL to come
// back (graphile-pool.ts). A job release that still failed (its connection
// broke mid-statement) leaves the job locked by this live pool; when that is
// reported (core/process/lifecycle.ts), or a runner ends by itself, the
// worker starts new Graphile runners and gives the old ones' leftover jobs
// back to the queue once their handlers have stopped, so they run again.
import { EventEmitter } from 'node:events';
import { parseCronItems, run, type Runner, type TaskList, type WorkerEvents } from 'graphile-worker';
import type { Logger } from 'pino';
import type { Config } from '../core/config.ts';
import { createDatabasePool, type DatabasePool } from '../core/db/pool.ts';
import { graphileLogger } from '../core/graphile-logger.ts';
import { createMetricsRegistry, registerPoolGauges, registerWorkerMetrics, type Registry } from '../core/metrics.ts';
import { JobCompletions } from '../core/jobs/completions.ts';
import { DeltaPublisher } from '../core/jobs/deltas.ts';
import { beatHeart, forgetWorkers, releaseWorkerJobs } from '../core/jobs/liveness.ts';
import { applyPlanLimits } from '../core/jobs/plan-limits.ts';
import { recordPlatformProviderKeys } from '../core/provider-keys/platform.ts';
import { poolOf, type PoolName } from '../core/jobs/pools.ts';
import { onLostDatabaseWork, reportLostDatabaseWork } from '../core/process/lifecycle.ts';
import { CRON_ITEMS } from '../schedules/index.ts';
import { CancelListener } from './cancellation.ts';
import { FairClock } from './fair-clock.ts';
import { retryEmptyFetches } from './fetch-retry.ts';
import { PatientPool } from './graphile-pool.ts';
import { ParkedJobWaker } from './parked-jobs.ts';
import { keepQueuesSerial, SiblingReturns } from './serial-batches.ts';
import { scheduleDeadWorkerSweep } from './tasks/maintenance-dead-workers.ts';
import { TASKS } from './tasks/index.ts';

export type RunningWorker = {
  /** The current Graphile runner of the short pool (a new one after a recovery); addJob works for any task. */
  readonly runner: Runner;
  /** Graphile Worker's events of both pools (job:start, job:success, ...), for tests and the bench. */
  events: WorkerEvents;
  /** platform_job_duration_seconds of this worker (process entries serve it on METRICS_PORT). */
  metrics: Registry;
  db: DatabasePool;
  workerIds: () => string[];
  /** Jobs running now in this process, by pool. */
  load: () => Record<PoolName, number>;
  /** This process's stream deltas (for the bench). */
  deltas: DeltaPublisher;
  /** Lets running jobs finish (up to the shutdown timeout), then releases what is left. */
  stop: () => Promise<void>;
};

export type WorkerOptions = { config: Config; databaseUrl: string; logger: Logger; concurrency?: number; ioConcurrency?: number };

/** The most jobs the I/O pool fetches at once (a burst of a thousand takes a few fetches). */
const IO_MAX_BATCH = 64;
/** Connections the I/O pool's tasks share: its jobs wait on the outside world, not the database. */
const IO_DB_CONNECTIONS = 8;

type Lane = { pool: PoolName; size: number; tasks: TaskList; pgPool: PatientPool };
/** One Graphile runner per lane, and what belongs to them. */
type Generation = { runners: Map<PoolName, Runner>; poolIds: Set<string>; ids: Set<string>; retired: boolean };

export async function startWorker({ config, databaseUrl, logger, concurrency, ioConcurrency }: WorkerOptions): Promise<RunningWorker> {
  const size = concurrency ?? config.worker.concurrency;
  const ioSize = ioConcurrency ?? config.worker.ioConcurrency;
  /** What this process's heartbeats tell about it (the console's Workers page). */
  const heartbeatInfo = { concurrency: size, ioConcurrency: ioSize };
  const db = await createDatabasePool(databaseUrl, { maximumPoolSize: Math.max(2, size + 1) + Math.min(ioSize, IO_DB_CONNECTIONS) });
  await applyPlanLimits(db, config.planLimits);
  await recordPlatformProviderKeys(db, config);
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
  // Stream deltas go out by NOTIFY on the same connections (one flush at a time).
  const deltas = new DeltaPublisher(completionPool, logger.child({ component: 'stream-deltas' }));
  const waker = new ParkedJobWaker(db, logger.child({ component: 'parked-jobs' }), config.worker.parkSweepMs);
  const clock = new FairClock(db, logger.child({ component: 'fair-clock' }));
  const siblingReturns = new SiblingReturns();
  const deps = {
    db, config, logger, cancels, completions, deltas, refused: jobTimes.refused, parked: (until: Date) => waker.parked(until),
    siblingsReturned: (queueId: string) => siblingReturns.settled(queueId),
    kinds: TASKS.map((task) => task.kind),
  };
  const lanes: Lane[] = (['short', 'io'] as const).map((pool) => ({
    pool,
    size: pool === 'io' ? ioSize : size,
    tasks: Object.fromEntries(TASKS.filter((t) => poolOf(t.kind) === pool).map((t) => [t.kind, t.build(deps)])),
    pgPool: new PatientPool(
      { connectionString: databaseUrl, max: pool === 'io' ? 6 : size + 2, application_name: `worker-graphile-${pool}` },
      logger.child({ component: `graphile-pool-${pool}` }),
    ),
  }));
  const running: Record<PoolName, number> = { short: 0, io: 0 };
  events.on('job:start', ({ job }) => {
    running[poolOf(job.task_identifier)]++;
    clock.started(job as never);
  });
  events.on('job:complete', ({ job }) => {
    running[poolOf(job.task_identifier)]--;
  });
  registerPoolGauges(metrics, { short: size, io: ioSize }, () => ({ ...running }));
  let stopping = false;

  const startLane = async (generation: Generation, lane: Lane): Promise<Runner> => {
    // Each runner has its own emitter (to know which ids are its own) that
    // forwards everything to the public one.
    const own = new EventEmitter();
    const forward = own.emit.bind(own);
    own.emit = (name: string | symbol, ...args: unknown[]) => {
      const heard = forward(name, ...args);
      return events.emit(name as never, ...(args as [never])) || heard;
    };
    // Jobs are locked under the pool id (Graphile 0.17, with or without its
    // local queue); its worker ids beat too, for the dead-worker sweep's sake.
    own.on('pool:create', ({ workerPool }: { workerPool: { id: string } }) => {
      generation.poolIds.add(workerPool.id);
      generation.ids.add(workerPool.id);
      beatHeart(db, workerPool.id, [workerPool.id], heartbeatInfo).catch((error) => logger.debug({ err: error }, 'heartbeat failed'));
    });
    if (lane.pool === 'short') {
      own.on('worker:create', ({ worker }: { worker: { workerId: string } }) => generation.ids.add(worker.workerId));
    } else {
      // The I/O pool fetches as many jobs as it has idle slots (at least one):
      // nothing waits in a batch while long turns hold the slots.
      own.on('localQueue:init', ({ localQueue }: { localQueue: { workerQueue: unknown[] } }) => {
        Object.defineProperty(localQueue, 'getJobBatchSize', { get: () => Math.min(IO_MAX_BATCH, Math.max(1, localQueue.workerQueue.length)), configurable: true });
      });
    }
    keepQueuesSerial(own as WorkerEvents, lane.pgPool, logger.child({ component: 'graphile-batches' }), reportLostDatabaseWork, siblingReturns);
    retryEmptyFetches(own as WorkerEvents);
    const runner = await run({
      pgPool: lane.pgPool,
      concurrency: lane.size,
      pollInterval: config.worker.pollIntervalMs,
      noHandleSignals: true,
      taskList: lane.tasks,
      // Schedules fire in the short pool, once across all worker processes.
      parsedCronItems: lane.pool === 'short' ? parseCronItems(CRON_ITEMS) : [],
      logger: graphileLogger(logger.child({ component: 'graphile-worker', pool: lane.pool })),
      events: own as WorkerEvents,
      gracefulShutdownAbortTimeout: Math.max(1000, config.shutdownTimeoutMs - 1000),
      // Batched fetches (localQueue) and batched completions. Safe for serial
      // queues: a queue is unlocked when its job's completion commits, and
      // keepQueuesSerial (serial-batches.ts, graphile/worker#621) keeps one
      // job per queue in a batch. A job's result is committed before it is
      // let go, so a crash in the batch's moment only makes a worker skip the
      // finished job later.
      preset: { worker: { completeJobBatchDelay: 0, failJobBatchDelay: 0, localQueue: { size: lane.size } } },
    });
    // A runner that ends while we still want it (it gave up on an error) is replaced.
    const ended = (why: string) => {
      if (!stopping && !generation.retired) void recover(why);
    };
    runner.promise.then(
      () => ended(`the Graphile runner of the ${lane.pool} pool stopped by itself`),
      (error) => ended(`the Graphile runner of the ${lane.pool} pool failed: ${(error as Error).message}`),
    );
    return runner;
  };

  const startGeneration = async (): Promise<Generation> => {
    const generation: Generation = { runners: new Map(), poolIds: new Set(), ids: new Set(), retired: false };
    for (const lane of lanes) {
      if (Object.keys(lane.tasks).length > 0) generation.runners.set(lane.pool, await startLane(generation, lane));
    }
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
  const stopGeneration = (generation: Generation) => Promise.all([...generation.runners.values()].map(stopRunner));

  let current: Generation;
  let recovering: Promise<void> | null = null;
  const recover = (reason: string) =>
    (recovering ??= (async () => {
      const old = current;
      old.retired = true; // its ids stop heart-beating from here on
      logger.warn({ reason }, 'worker: restarting the Graphile pools to recover jobs they may have left locked');
      await stopGeneration(old);
      if (stopping) return;
      current = await startGeneration(); // waits for the database
      const oldIds = [...old.ids];
      for (let attempt = 0; !stopping; attempt++) {
        try {
          const requeued = await db.transaction((tx) => releaseWorkerJobs(tx, oldIds));
          await forgetWorkers(db, oldIds);
          logger.info({ requeued }, 'worker: Graphile pools restarted; jobs the old ones left locked are queued again');
          return;
        } catch (error) {
          logger.debug({ err: error, attempt }, 'worker: releasing the old pools\' jobs failed; retrying');
          await new Promise((resolve) => setTimeout(resolve, Math.min(2_000, 100 * 2 ** attempt)));
        }
      }
    })()
      .catch((error) => logger.error({ err: error }, 'worker: recovery failed'))
      .finally(() => (recovering = null)));
  current = await startGeneration();
  const stopListening = onLostDatabaseWork(() => void recover('a job release failed while the database was away'));
  // Graphile gives up recording a batch of finished or failed jobs after its
  // retries (PostgreSQL away too long) and shuts that pool down slowly,
  // leaving the batch's jobs locked: restart the pools now, which queues them
  // again (found by the soak: a turn stuck locked until the end).
  events.on('pool:fatalError', ({ action, error }: { action?: string; error?: unknown }) => {
    if (!stopping && !current.retired) void recover(`Graphile gave up on ${action ?? 'recording jobs'}: ${String((error as Error | undefined)?.message ?? error)}`);
  });

  const heartbeat = setInterval(() => {
    const [poolId] = current.poolIds;
    if (current.retired || !poolId) return;
    beatHeart(db, poolId, [...current.ids], heartbeatInfo).catch((error) => logger.debug({ err: error }, 'heartbeat failed'));
  }, config.worker.heartbeatMs);
  heartbeat.unref();

  // Start the dead-worker sweep chain now rather than at the next cron minute.
  await scheduleDeadWorkerSweep(db, 0, true);
  logger.info({ concurrency: size, ioConcurrency: ioSize, pools: Object.fromEntries(lanes.map((l) => [l.pool, Object.keys(l.tasks)])) }, 'worker started');

  let stopped: Promise<void> | null = null;
  const stop = () =>
    (stopped ??= (async () => {
      stopping = true;
      stopListening();
      await recovering;
      const ids = [...current.ids];
      await stopGeneration(current);
      clearInterval(heartbeat);
      waker.stop();
      await clock.stop();
      await deltas.stop();
      jobTimes.forget();
      await forgetWorkers(db, ids).catch(() => undefined);
      await cancels.stop();
      for (const lane of lanes) await lane.pgPool.end().catch(() => undefined);
      await completionPool.end().catch(() => undefined);
      // slonik's end() throws when a connection died during an outage: not a failed stop.
      await db.end().catch((error) => logger.debug({ err: error }, 'database pool ended with an error'));
      logger.info('worker stopped');
    })());

  return {
    get runner() {
      return current.runners.get('short') ?? [...current.runners.values()][0]!;
    },
    events,
    metrics,
    db,
    workerIds: () => [...current.ids],
    load: () => ({ ...running }),
    deltas,
    stop,
  };
}
