// The service position of each pool's fair order (migration 0037): the latest
// start tag a worker started. New jobs of an account that has no backlog are
// tagged at this position, so they go to the head of the queue. Each worker
// process notes the tags of the fair jobs it starts and publishes the
// latest one every PUBLISH_MS when it moved (one small write, whatever the
// number of jobs); the row only ever moves forward, whichever process writes.
import type { Logger } from 'pino';
import { sql, type DatabasePool } from '../core/db/pool.ts';
import { FAIR_FLAG } from '../core/jobs/enqueue.ts';
import { poolOf, type PoolName } from '../core/jobs/pools.ts';

const PUBLISH_MS = 100;

type StartedJob = { task_identifier?: string; run_at?: unknown; flags?: Record<string, unknown> | null };

export class FairClock {
  private readonly latest = new Map<PoolName, number>();
  private readonly published = new Map<PoolName, number>();
  private timer: NodeJS.Timeout | null = null;
  private writing: Promise<void> | null = null;

  constructor(
    private readonly db: DatabasePool,
    private readonly logger: Logger,
  ) {}

  /** A job started: if its run_at is a fair tag, its pool's position may move. */
  started(job: StartedJob): void {
    if (!job.flags?.[FAIR_FLAG] || !job.task_identifier || !job.run_at) return;
    const at = new Date(job.run_at as string | Date).getTime();
    const pool = poolOf(job.task_identifier);
    if (at > (this.latest.get(pool) ?? 0)) this.latest.set(pool, at);
    this.timer ??= setTimeout(() => void this.publish(), PUBLISH_MS).unref();
  }

  /** Writes what moved since the last write (also called on stop). */
  publish(): Promise<void> {
    this.timer = null;
    const moved = [...this.latest].filter(([pool, at]) => at > (this.published.get(pool) ?? 0));
    if (moved.length === 0) return this.writing ?? Promise.resolve();
    const write = (async () => {
      await this.writing;
      try {
        await this.db.query(sql.unsafe`
          insert into fair_clock as c (pool, vtime)
          select * from unnest(${sql.array(
            moved.map(([pool]) => pool),
            'text',
          )}, ${sql.array(
            moved.map(([, at]) => new Date(at).toISOString()),
            'timestamptz',
          )})
          on conflict (pool) do update set vtime = greatest(c.vtime, excluded.vtime)`);
        for (const [pool, at] of moved) this.published.set(pool, Math.max(at, this.published.get(pool) ?? 0));
      } catch (error) {
        // Next time: a stale position only puts new accounts' jobs further ahead.
        this.logger.debug({ err: error }, 'fair clock: could not publish the service position');
      }
    })();
    this.writing = write;
    return write;
  }

  stop(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    return this.publish();
  }
}
