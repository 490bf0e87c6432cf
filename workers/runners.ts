// The Graphile runners of a worker process over its life: one generation
// (a runner per lane, workers/lanes.ts) at a time, each of its pools beating
// a heartbeat. When a runner ends by itself, a job release was lost, or
// Graphile gave up recording a batch of finished jobs (the database away too
// long), the worker starts a new generation and gives the old one's leftover
// jobs back to the queue once its handlers stopped, so they run again.
import type { Runner, WorkerEvents } from 'graphile-worker';
import type { Logger } from 'pino';
import type { Config } from '../core/config.ts';
import type { DatabasePool } from '../core/db/pool.ts';
import { beatHeart, forgetWorkers, releaseWorkerJobs, type WorkerInfo } from '../core/jobs/liveness.ts';
import { onLostDatabaseWork } from '../core/process/lifecycle.ts';
import { newGeneration, startGeneration, stopGeneration, type Generation, type Lane, type LaneHooks } from './lanes.ts';

export class Runners {
  private current!: Generation;
  private recovering: Promise<void> | null = null;
  private stopping = false;
  private heartbeat: NodeJS.Timeout | null = null;
  private stopListening: () => void = () => undefined;

  constructor(
    private readonly lanes: readonly Lane[],
    private readonly hooks: Omit<LaneHooks, 'ended'>,
    private readonly db: DatabasePool,
    private readonly info: WorkerInfo,
  ) {}

  private get config(): Config {
    return this.hooks.config;
  }

  private get logger(): Logger {
    return this.hooks.logger;
  }

  private laneHooks(): LaneHooks {
    return { ...this.hooks, ended: (why) => void this.recover(why) };
  }

  async start(events: WorkerEvents): Promise<void> {
    this.current = await startGeneration(this.lanes, this.laneHooks());
    this.beat();
    this.stopListening = onLostDatabaseWork(
      () => void this.recover('a job release failed while the database was away'),
    );
    // Graphile gives up recording a batch of finished or failed jobs after its
    // retries (PostgreSQL away too long) and shuts that pool down slowly,
    // leaving the batch's jobs locked: restart the pools now, which queues them
    // again (left alone, they would stay locked while this process lives).
    // A retired generation's pools may still report theirs while they stop:
    // only the current generation's restart the pools.
    events.on('pool:fatalError', ({ action, error, workerPool }) => {
      if (!this.current.poolIds.has(workerPool.id)) return;
      void this.recover(
        `Graphile gave up on ${action ?? 'recording jobs'}: ${String((error as Error | undefined)?.message ?? error)}`,
      );
    });
    this.heartbeat = setInterval(() => this.beat(), this.config.worker.heartbeatMs);
    this.heartbeat.unref();
  }

  /** The short pool's runner (addJob works for any task). */
  get runner(): Runner {
    return (this.current.runs.get('short') ?? [...this.current.runs.values()][0]!).runner;
  }

  /** The ids Graphile locks this process's jobs with (its pools'). */
  poolIds(): string[] {
    return [...this.current.poolIds];
  }

  private beat(): void {
    if (!this.current || this.current.retired || this.current.poolIds.size === 0) return;
    const ids = this.poolIds();
    beatHeart(this.db, ids[0]!, ids, this.info).catch((error) => this.logger.debug({ err: error }, 'heartbeat failed'));
  }

  /** New runners now; the old ones' leftover jobs back to the queue once their handlers stopped. */
  recover(reason: string): Promise<void> {
    this.recovering ??= this.replace(reason)
      .catch((error) => this.logger.error({ err: error }, 'worker: recovery failed'))
      .finally(() => {
        this.recovering = null;
      });
    return this.recovering;
  }

  private async replace(reason: string): Promise<void> {
    if (this.stopping || this.current.retired) return;
    const old = this.current;
    old.retired = true; // its ids stop heart-beating from here on
    this.logger.warn({ reason }, 'worker: restarting the Graphile pools to recover jobs they may have left locked');
    await stopGeneration(old, this.config.shutdownTimeoutMs, this.logger);
    const oldIds = [...old.poolIds];
    // Until a generation starts (the database may go away again meanwhile):
    // left on the retired one, this process would run no job while it lives.
    const started = await this.untilDone(
      () => {
        const next = newGeneration();
        return startGeneration(this.lanes, this.laneHooks(), next).catch((error: unknown) => {
          oldIds.push(...next.poolIds);
          throw error;
        });
      },
      (error, attempt) =>
        this.logger.warn({ err: error, attempt }, 'worker: new Graphile pools failed to start; retrying'),
    );
    if (!started) return;
    this.current = started;
    this.beat();
    const requeued = await this.untilDone(
      async () => {
        const n = await this.db.transaction((tx) => releaseWorkerJobs(tx, oldIds));
        await forgetWorkers(this.db, oldIds);
        return n;
      },
      (error, attempt) =>
        this.logger.debug({ err: error, attempt }, "worker: releasing the old pools' jobs failed; retrying"),
    );
    if (requeued !== undefined)
      this.logger.info(
        { requeued },
        'worker: Graphile pools restarted; jobs the old ones left locked are queued again',
      );
  }

  /** Runs `step` until it succeeds (backing off up to 2 s) or the worker stops (then undefined). */
  private async untilDone<T>(
    step: () => Promise<T>,
    failed: (error: unknown, attempt: number) => void,
  ): Promise<T | undefined> {
    for (let attempt = 0; !this.stopping; attempt++) {
      try {
        return await step();
      } catch (error) {
        failed(error, attempt);
        await new Promise((resolve) => setTimeout(resolve, Math.min(2_000, 100 * 2 ** attempt)));
      }
    }
    return undefined;
  }

  /**
   * Lets running jobs finish (up to the shutdown timeout), then `settle`
   * (their results written), then stops beating and forgets this process's ids.
   */
  async stop(settle: () => Promise<void>): Promise<void> {
    this.stopping = true;
    this.stopListening();
    await this.recovering;
    const ids = this.poolIds();
    await stopGeneration(this.current, this.config.shutdownTimeoutMs, this.logger);
    await settle();
    if (this.heartbeat) clearInterval(this.heartbeat);
    await forgetWorkers(this.db, ids).catch(() => undefined);
  }
}
