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
import { giveBack, takeHeld, type LocalQueue } from './held-wakeups.ts';

/** The events of every runner that reach the worker's own emitter (tests, the bench, metrics). */
const FORWARDED = [
  'job:start',
  'job:success',
  'job:error',
  'job:failed',
  'job:complete',
  'pool:create',
  'pool:fatalError',
  'pool:gracefulShutdown',
  'pool:forcefulShutdown',
  'localQueue:setMode',
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

/** A lane's runner, with its pg pool and local queue (for the jobs it holds when it stops). */
export type LaneRun = {
  runner: Runner;
  pgPool: PatientPool;
  readonly queue: LocalQueue | null;
  /** The runner ended (by itself, or stopped): Graphile stops a runner once. */
  readonly ended: boolean;
};

/** One runner per lane, and the ids Graphile locks jobs with (its pools'). */
export type Generation = {
  runs: Map<PoolName, LaneRun>;
  poolIds: Set<string>;
  retired: boolean;
  /** Its stop, once begun: a runner is stopped once. */
  stopped?: Promise<unknown>;
};

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

export const newGeneration = (): Generation => ({ runs: new Map(), poolIds: new Set(), retired: false });

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
      if (Object.keys(lane.tasks).length > 0) generation.runs.set(lane.pool, await startLane(generation, lane, hooks));
    }
  } catch (error) {
    generation.retired = true;
    await stopGeneration(generation, hooks.config.shutdownTimeoutMs, hooks.logger);
    throw error;
  }
  return generation;
}

async function startLane(generation: Generation, lane: Lane, hooks: LaneHooks): Promise<LaneRun> {
  const { config, logger } = hooks;
  const own = new EventEmitter() as WorkerEvents;
  for (const name of FORWARDED)
    (own as EventEmitter).on(name, (event: unknown) => (hooks.events as EventEmitter).emit(name, event));
  own.on('pool:create', ({ workerPool }) => generation.poolIds.add(workerPool.id));
  let queue: LocalQueue | null = null;
  own.on('localQueue:init', ({ localQueue }) => (queue = localQueue));
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
  let ended = false;
  runner.promise.then(
    () => {
      ended = true;
      if (!generation.retired) hooks.ended(`the Graphile runner of the ${lane.pool} pool stopped by itself`);
    },
    (error) => {
      ended = true;
      if (!generation.retired)
        hooks.ended(`the Graphile runner of the ${lane.pool} pool failed: ${(error as Error).message}`);
    },
  );
  return {
    runner,
    pgPool: lane.pgPool,
    get queue() {
      return queue;
    },
    get ended() {
      return ended;
    },
  };
}

/**
 * Stops a lane's runner: running jobs may finish (up to the shutdown timeout),
 * then what is left is released by force. The wake-ups its local queue holds
 * are taken off first and given back after (workers/held-wakeups.ts).
 */
async function stopRun(run: LaneRun, shutdownTimeoutMs: number, logger: Logger): Promise<void> {
  if (run.ended) return;
  const held = takeHeld(run.queue);
  const poolId = run.queue?.workerPool.id;
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'timeout'>(
    (resolve) => (timer = setTimeout(resolve, shutdownTimeoutMs, 'timeout').unref()),
  );
  const outcome = await Promise.race([
    run.runner.stop().then(
      () => 'stopped' as const,
      () => 'stopped' as const,
    ),
    timeout,
  ]);
  clearTimeout(timer);
  if (outcome === 'timeout') {
    logger.warn('worker: jobs still running at the shutdown timeout; releasing them for another worker');
    await run.runner.kill().catch((error) => logger.error({ err: error }, 'worker: forceful stop failed'));
  }
  if (poolId && held.length > 0)
    await giveBack(run.pgPool, poolId, held).catch((error) =>
      logger.warn(
        { err: error, jobs: held.length },
        'worker: could not give back the jobs its pool held; the dead-worker sweep will',
      ),
    );
}

/** Stops the generation's runners, once however often it is asked. */
export function stopGeneration(generation: Generation, shutdownTimeoutMs: number, logger: Logger): Promise<unknown> {
  generation.stopped ??= Promise.all(
    [...generation.runs.values()].map((run) => stopRun(run, shutdownTimeoutMs, logger)),
  );
  return generation.stopped;
}
