// startWorker: one worker process's Graphile Worker runners (workers/lanes.ts,
// runners.ts) with our tasks and cron items, logs through pino, a heartbeat
// per Graphile pool, cancellation of running jobs, and an orderly stop. Used
// by workers/runner.ts (the worker process), ops/start.ts (all-in-one), the
// tests and the bench. Graphile runs on a pool that waits for PostgreSQL to
// come back during an outage (graphile-pool.ts).
import { EventEmitter } from 'node:events';
import type { Runner, TaskList, WorkerEvents } from 'graphile-worker';
import type { Logger } from 'pino';
import type { Config } from '../core/config.ts';
import { createDatabasePool, type DatabasePool } from '../core/db/pool.ts';
import { createMetricsRegistry, registerPoolGauges, registerWorkerMetrics, type Registry } from '../core/metrics.ts';
import { JobCompletions } from '../core/jobs/completions.ts';
import { COUNT_FOLD_MS, keepFoldingAccountCounts } from '../core/jobs/counts.ts';
import { DeltaPublisher } from '../core/jobs/deltas.ts';
import { applyPlanLimits } from '../core/jobs/plan-limits.ts';
import { poolOf, type PoolName } from '../core/jobs/pools.ts';
import { scheduleDeadWorkerSweep } from '../core/maintenance/dead-worker-sweep.ts';
import { recordPlatformProviderKeys } from '../core/provider-keys/platform.ts';
import { CancelListener } from './cancellation.ts';
import type { PlatformTask, TaskDeps } from './define-task.ts';
import { FairClock } from './fair-clock.ts';
import { PatientPool } from './graphile-pool.ts';
import { createLane, type Lane } from './lanes.ts';
import { Runners } from './runners.ts';
import { TASKS } from './tasks/index.ts';
import { ticketTask } from './tickets.ts';

export type RunningWorker = {
  /** The current Graphile runner of the short pool (a new one after a recovery); addJob works for any task. */
  readonly runner: Runner;
  /** Graphile Worker's job and pool events of both pools (job:start, job:success, ...), for tests and the bench. */
  events: WorkerEvents;
  /** platform_job_duration_seconds of this worker (process entries serve it on METRICS_PORT). */
  metrics: Registry;
  db: DatabasePool;
  /** The ids Graphile locks this process's jobs with (its pools'). */
  workerIds: () => string[];
  /** Jobs running now in this process, by pool. */
  load: () => Record<PoolName, number>;
  /** This process's stream deltas (for the bench). */
  deltas: DeltaPublisher;
  /** Lets running jobs finish (up to the shutdown timeout), then releases what is left. */
  stop: () => Promise<void>;
};

export type WorkerOptions = {
  config: Config;
  databaseUrl: string;
  logger: Logger;
  concurrency?: number;
  ioConcurrency?: number;
};

/** Connections the I/O pool's tasks share: its jobs wait on the outside world, not the database. */
const IO_DB_CONNECTIONS = 8;

/** The Graphile task list of each pool: platform kinds go through their wake-ups (tickets.ts), scheduled tasks build their own. */
function taskLists(deps: TaskDeps): Record<PoolName, TaskList> {
  const platform = new Map<string, PlatformTask>(
    TASKS.flatMap((t) => ('platform' in t ? [[t.kind, t.platform] as const] : [])),
  );
  const tickets = ticketTask(platform, deps);
  const lists: Record<PoolName, TaskList> = { short: {}, io: {} };
  for (const task of TASKS) lists[poolOf(task.kind)][task.kind] = 'platform' in task ? tickets : task.build(deps);
  return lists;
}

export async function startWorker({
  config,
  databaseUrl,
  logger,
  concurrency,
  ioConcurrency,
}: WorkerOptions): Promise<RunningWorker> {
  const size = concurrency ?? config.worker.concurrency;
  const ioSize = ioConcurrency ?? config.worker.ioConcurrency;
  /** What this process's heartbeats tell about it (the console's Workers page). */
  const heartbeatInfo = { concurrency: size, ioConcurrency: ioSize };
  const db = await createDatabasePool(databaseUrl, {
    maximumPoolSize: Math.max(2, size + 1) + Math.min(ioSize, IO_DB_CONNECTIONS),
  });
  await applyPlanLimits(db, config.planLimits);
  await recordPlatformProviderKeys(db, config);
  const cancels = new CancelListener(databaseUrl, db, logger.child({ component: 'job-cancel' }));
  await cancels.start();
  const events: WorkerEvents = new EventEmitter() as WorkerEvents;
  const metrics = createMetricsRegistry();
  const attempts = registerWorkerMetrics(metrics);
  // Attempt starts, claims and results (core/jobs/completions.ts): two connections, asynchronous commit.
  const completionPool = new PatientPool(
    {
      connectionString: databaseUrl,
      max: 2,
      application_name: 'worker-completions',
      options: '-c synchronous_commit=off',
    },
    logger.child({ component: 'completion-pool' }),
    'completion pool',
  );
  const completions = new JobCompletions(completionPool, logger.child({ component: 'job-completions' }));
  // Stream deltas go out by NOTIFY on a connection of their own: never behind a claim, a completion or a lock.
  const deltas = DeltaPublisher.connect(databaseUrl, logger.child({ component: 'stream-deltas' }));
  const clock = new FairClock(db, logger.child({ component: 'fair-clock' }));
  const stopFolding = keepFoldingAccountCounts(db, logger.child({ component: 'job-counts' }), COUNT_FOLD_MS);
  const short = createLane('short', size, Math.max(size, config.worker.fetchBatch), databaseUrl, logger);
  const io = createLane('io', ioSize, Math.min(ioSize, config.worker.ioFetchBatch), databaseUrl, logger);
  const deps: TaskDeps = {
    db,
    config,
    logger,
    cancels,
    completions,
    deltas,
    refused: attempts.refused,
    observe: attempts.observe,
    graphilePool: short.pgPool,
  };
  const lists = taskLists(deps);
  short.tasks = lists.short;
  io.tasks = lists.io;
  const lanes: Lane[] = [short, io];
  const running: Record<PoolName, number> = { short: 0, io: 0 };
  events.on('job:start', ({ job }) => {
    running[poolOf(job.task_identifier)]++;
    clock.started(job);
  });
  events.on('job:complete', ({ job }) => {
    running[poolOf(job.task_identifier)]--;
  });
  registerPoolGauges(metrics, { short: size, io: ioSize }, () => ({ ...running }));
  const runners = new Runners(
    lanes,
    { config, logger, events, fetched: (ids) => completions.prefetch(ids) },
    db,
    heartbeatInfo,
  );
  await runners.start(events);
  // Start the dead-worker sweep chain now rather than at the next cron minute.
  await scheduleDeadWorkerSweep(db, 0, true);
  logger.info(
    {
      concurrency: size,
      ioConcurrency: ioSize,
      pools: Object.fromEntries(lanes.map((l) => [l.pool, Object.keys(l.tasks)])),
    },
    'worker started',
  );

  let stopped: Promise<void> | null = null;
  const stop = () =>
    (stopped ??= (async () => {
      await runners.stop(() => completions.drain());
      stopFolding();
      await clock.stop();
      await deltas.stop();
      await cancels.stop();
      for (const lane of lanes) await lane.pgPool.end().catch(() => undefined);
      await completionPool.end().catch(() => undefined);
      // slonik's end() throws when a connection died during an outage: not a failed stop.
      await db.end().catch((error) => logger.debug({ err: error }, 'database pool ended with an error'));
      logger.info('worker stopped');
    })());

  return {
    get runner() {
      return runners.runner;
    },
    events,
    metrics,
    db,
    workerIds: () => runners.poolIds(),
    load: () => ({ ...running }),
    deltas,
    stop,
  };
}
