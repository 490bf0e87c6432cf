// The Graphile Worker runners of one worker process, one per pool of slots
// (core/jobs/pools.ts): the short pool runs short and CPU-bound work,
// WORKER_CONCURRENCY at a time; the I/O pool the jobs that wait on a model
// or a channel, WORKER_IO_CONCURRENCY at a time. Each is a plain Graphile
// runner configured through its documented options: its own pg pool, a
// local queue (batched fetches) and batched completions.
//
// A generation is one runner per lane. When a runner ends by itself, or
// Graphile gives up recording finished jobs (the database away too long),
// the worker starts a new generation and gives the old one's leftover jobs
// back (workers/worker.ts).
import { EventEmitter } from 'node:events';
import { parseCronItems, run, type Runner, type TaskList, type WorkerEvents } from 'graphile-worker';
import type { Logger } from 'pino';
import type { Config } from '../core/config.ts';
import { graphileLogger } from '../core/graphile-logger.ts';
import type { PoolName } from '../core/jobs/pools.ts';
import { CRON_ITEMS } from '../schedules/index.ts';
import { PatientPool } from './graphile-pool.ts';

/** The events of every runner that reach the worker's own emitter (tests, the bench, metrics). */
const FORWARDED = [
  'job:start',
  'job:success',
  'job:error',
  'job:failed',
  'job:complete',
  'pool:create',
  'pool:fatalError',
] as const;

export type Lane = {
  pool: PoolName;
  /** Slots: Graphile's concurrency. */
  size: number;
  /**
   * Jobs fetched at once (Graphile's local queue). A fetch happens when the
   * lane's fetched jobs are all taken, even when every slot is busy, so this
   * many may wait in a full process for a slot: the I/O lane keeps it small.
   */
  fetchBatch: number;
  tasks: TaskList;
  pgPool: PatientPool;
};

/** One runner per lane, and the ids Graphile locks jobs with (its pools'). */
export type Generation = { runners: Map<PoolName, Runner>; poolIds: Set<string>; retired: boolean };

export function createLane(
  pool: PoolName,
  size: number,
  fetchBatch: number,
  databaseUrl: string,
  logger: Logger,
): Lane {
  const pgPool = new PatientPool(
    // The I/O pool's tasks wait on the outside world: a few connections serve its thousand slots.
    { connectionString: databaseUrl, max: pool === 'io' ? 6 : size + 2, application_name: `worker-graphile-${pool}` },
    logger.child({ component: `graphile-pool-${pool}` }),
  );
  return { pool, size, fetchBatch, tasks: {}, pgPool };
}

export type LaneHooks = {
  config: Config;
  logger: Logger;
  /** The worker's own emitter: FORWARDED events of every runner go there. */
  events: WorkerEvents;
  /** A runner ended by itself while the worker still wanted it. */
  ended: (why: string) => void;
  /** The platform jobs a lane just fetched wake-ups for (their reads start at once). */
  fetched: (jobIds: readonly string[]) => void;
};

export const newGeneration = (): Generation => ({ runners: new Map(), poolIds: new Set(), retired: false });

/**
 * Starts a runner per lane into `generation`. If one fails to start, the ones
 * already started are stopped and the error is thrown; the generation's pool
 * ids then name any job they locked meanwhile.
 */
export async function startGeneration(
  lanes: readonly Lane[],
  hooks: LaneHooks,
  generation: Generation = newGeneration(),
): Promise<Generation> {
  try {
    for (const lane of lanes) {
      if (Object.keys(lane.tasks).length > 0)
        generation.runners.set(lane.pool, await startLane(generation, lane, hooks));
    }
  } catch (error) {
    generation.retired = true;
    await stopGeneration(generation, hooks.config.shutdownTimeoutMs, hooks.logger);
    throw error;
  }
  return generation;
}

async function startLane(generation: Generation, lane: Lane, hooks: LaneHooks): Promise<Runner> {
  const { config, logger } = hooks;
  const own = new EventEmitter() as WorkerEvents;
  for (const name of FORWARDED)
    (own as EventEmitter).on(name, (event: unknown) => (hooks.events as EventEmitter).emit(name, event));
  own.on('pool:create', ({ workerPool }) => generation.poolIds.add(workerPool.id));
  own.on('localQueue:getJobs:complete', ({ jobs }) => {
    const ids = jobs.flatMap((job) => {
      const jobId = (job.payload as { jobId?: unknown } | null)?.jobId;
      return typeof jobId === 'string' ? [jobId] : [];
    });
    if (ids.length > 0) hooks.fetched(ids);
  });
  const runner = await run({
    pgPool: lane.pgPool,
    concurrency: lane.size,
    pollInterval: config.worker.pollIntervalMs,
    noHandleSignals: true,
    taskList: lane.tasks,
    // Schedules fire in the short pool, once across all worker processes.
    parsedCronItems: lane.pool === 'short' ? parseCronItems(CRON_ITEMS) : [],
    logger: graphileLogger(logger.child({ component: 'graphile-worker', pool: lane.pool })),
    events: own,
    gracefulShutdownAbortTimeout: Math.max(1000, config.shutdownTimeoutMs - 1000),
    // Batched fetches and completions. A wake-up that is completed late only
    // finds its job done when it runs again: the job's state is the platform's.
    preset: { worker: { completeJobBatchDelay: 0, failJobBatchDelay: 0, localQueue: { size: lane.fetchBatch } } },
  });
  runner.promise.then(
    () => !generation.retired && hooks.ended(`the Graphile runner of the ${lane.pool} pool stopped by itself`),
    (error) =>
      !generation.retired &&
      hooks.ended(`the Graphile runner of the ${lane.pool} pool failed: ${(error as Error).message}`),
  );
  return runner;
}

/** Stops a runner: running jobs may finish (up to the shutdown timeout), then what is left is released by force. */
export async function stopRunner(runner: Runner, shutdownTimeoutMs: number, logger: Logger): Promise<void> {
  const timer = new Promise<'timeout'>((resolve) => setTimeout(resolve, shutdownTimeoutMs, 'timeout').unref());
  const outcome = await Promise.race([
    runner.stop().then(
      () => 'stopped' as const,
      () => 'stopped' as const,
    ),
    timer,
  ]);
  if (outcome === 'timeout') {
    logger.warn('worker: jobs still running at the shutdown timeout; releasing them for another worker');
    await runner.kill().catch((error) => logger.error({ err: error }, 'worker: forceful stop failed'));
  }
}

export function stopGeneration(generation: Generation, shutdownTimeoutMs: number, logger: Logger): Promise<unknown> {
  return Promise.all([...generation.runners.values()].map((runner) => stopRunner(runner, shutdownTimeoutMs, logger)));
}
