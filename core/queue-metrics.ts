// The queue and the worker fleet as Prometheus sees them, read at scrape
// time from Graphile Worker's open jobs and the heartbeats (both small at
// any size of the jobs table), plus the autoscaling signal:
// platform_worker_processes_desired. Registered with the other database
// gauges (core/metrics.ts); every api and worker process exports the same
// values, so rules and dashboards take max() across instances.
import { Gauge, type Registry } from 'prom-client';
import { z } from 'zod';
import { sql, type CommonQueryMethods, type DatabasePool } from './db/pool.ts';
import type { Config } from './config.ts';
import { POOLS, poolOf, type PoolName } from './jobs/pools.ts';

/**
 * The ready / running / waiting counts of Graphile jobs aliased `g` (each a
 * wake-up: of one platform job, or of a serial queue's next job): ready is
 * due, unlocked and with attempts left; running is locked by a worker;
 * waiting is due later (a delayed step, a retry's backoff, a Retry-After).
 */
export const QUEUE_STATE_COUNTS = sql.fragment`
  count(*) filter (where g.locked_at is null and g.run_at <= now() and g.attempts < g.max_attempts)::int as ready,
  count(*) filter (where g.locked_at is not null)::int as running,
  count(*) filter (where g.locked_at is null and g.run_at > now())::int as waiting`;

const QueueRow = z.object({
  kind: z.string(),
  ready: z.number(),
  running: z.number(),
  waiting: z.number(),
  oldest_ready_s: z.number().nullable(),
});
export type QueueRow = z.infer<typeof QueueRow>;
const WorkerRow = z.object({
  stale: z.boolean(),
  age_s: z.number(),
  concurrency: z.number().nullable(),
  io_concurrency: z.number().nullable(),
});

export type QueueSnapshot = { queue: readonly QueueRow[]; workers: ReadonlyArray<z.infer<typeof WorkerRow>> };

/**
 * Open jobs by kind as Graphile Worker holds them: ready, running, waiting,
 * and how long the oldest ready one has waited since it was due (a fair
 * start tag may lie before the job was added: its wait counts from then).
 */
export async function readQueueByKind(db: CommonQueryMethods): Promise<readonly QueueRow[]> {
  return db.any(sql.type(QueueRow)`
    select g.task_identifier as kind, ${QUEUE_STATE_COUNTS},
      extract(epoch from now() - min(greatest(g.run_at, g.created_at))
        filter (where g.locked_at is null and g.run_at <= now() and g.attempts < g.max_attempts))::float8 as oldest_ready_s
    from graphile_worker.jobs g group by g.task_identifier`);
}

export async function readQueueSnapshot(db: DatabasePool, staleAfterMs: number): Promise<QueueSnapshot> {
  const queue = await readQueueByKind(db);
  const workers = await db.any(sql.type(WorkerRow)`
    select max(last_seen_at) < now() - make_interval(secs => ${staleAfterMs / 1000}) as stale,
      extract(epoch from now() - max(last_seen_at))::float8 as age_s,
      max(concurrency) as concurrency, max(io_concurrency) as io_concurrency
    from worker_heartbeats group by hostname, pid`);
  return { queue, workers };
}

/**
 * Worker processes the queue needs now: per pool, the jobs running plus the
 * jobs ready to start, over one process's slots in that pool; the largest
 * pool decides. Slots per process are the live workers' own (their
 * heartbeats), else the configured defaults.
 */
export function desiredWorkerProcesses(snapshot: QueueSnapshot, defaults: Record<PoolName, number>): number {
  const live = snapshot.workers.filter((w) => !w.stale);
  const slots: Record<PoolName, number> = {
    short: Math.max(1, ...live.map((w) => w.concurrency ?? 0).filter((n) => n > 0), live.length ? 0 : defaults.short),
    io: Math.max(1, ...live.map((w) => w.io_concurrency ?? 0).filter((n) => n > 0), live.length ? 0 : defaults.io),
  };
  const demand: Record<PoolName, number> = { short: 0, io: 0 };
  for (const row of snapshot.queue) demand[poolOf(row.kind)] += row.running + row.ready;
  return Math.max(0, ...POOLS.map((pool) => Math.ceil(demand[pool] / slots[pool])));
}

export type QueueMetricsOptions = { staleAfterMs: number; slots: Record<PoolName, number> };

/** The options from the configuration (api and worker processes export the same gauges). */
export const queueMetricsOptions = (worker: Config['worker']): QueueMetricsOptions => ({
  staleAfterMs: worker.staleAfterMs,
  slots: { short: worker.concurrency, io: worker.ioConcurrency },
});

/** `read` is core/metrics.ts's scrape reader (timeout, error counting). */
export function registerQueueGauges(
  registry: Registry,
  db: DatabasePool,
  options: QueueMetricsOptions,
  read: <T>(
    source: string,
    query: () => Promise<T>,
    onValue: (value: T) => void,
    onError: () => void,
  ) => Promise<unknown>,
): void {
  // One read serves every gauge of a scrape (prom-client collects them all at once).
  let current: Promise<QueueSnapshot> | null = null;
  const snapshot = () =>
    (current ??= readQueueSnapshot(db, options.staleAfterMs).finally(() => {
      current = null;
    }));
  new Gauge({
    name: 'platform_queue_jobs',
    help: 'Open jobs in the queue by kind and state: ready (due, waiting for a slot), running, waiting (scheduled, parked or backing off)',
    labelNames: ['kind', 'state'] as const,
    registers: [registry],
    async collect() {
      await read(
        'platform_queue_jobs',
        snapshot,
        (s) => {
          this.reset();
          for (const row of s.queue)
            for (const state of ['ready', 'running', 'waiting'] as const)
              this.set({ kind: row.kind, state }, row[state]);
        },
        () => this.reset(),
      );
    },
  });
  new Gauge({
    name: 'platform_queue_oldest_ready_seconds',
    help: 'How long the oldest job that is due has waited for a slot (0 when none waits)',
    registers: [registry],
    async collect() {
      await read(
        'platform_queue_oldest_ready_seconds',
        snapshot,
        (s) => this.set(Math.max(0, ...s.queue.map((r) => r.oldest_ready_s ?? 0))),
        () => this.remove(),
      );
    },
  });
  new Gauge({
    name: 'platform_worker_processes',
    help: 'Worker processes by their heartbeats: live, or stale (silent past WORKER_STALE_AFTER_MS, their jobs about to be given to others)',
    labelNames: ['state'] as const,
    registers: [registry],
    async collect() {
      await read(
        'platform_worker_processes',
        snapshot,
        (s) => {
          this.set({ state: 'live' }, s.workers.filter((w) => !w.stale).length);
          this.set({ state: 'stale' }, s.workers.filter((w) => w.stale).length);
        },
        () => this.reset(),
      );
    },
  });
  new Gauge({
    name: 'platform_worker_heartbeat_age_seconds',
    help: 'Age of the freshest worker heartbeat (absent when no worker process has ever beaten)',
    registers: [registry],
    async collect() {
      await read(
        'platform_worker_heartbeat_age_seconds',
        snapshot,
        (s) => {
          // An unlabelled gauge reset() shows 0; remove() shows nothing (absent, as it should be).
          if (s.workers.length === 0) this.remove();
          else this.set(Math.min(...s.workers.map((w) => w.age_s)));
        },
        () => this.remove(),
      );
    },
  });
  new Gauge({
    name: 'platform_worker_processes_desired',
    help: "Worker processes the queue needs now (autoscaling signal): per pool, running plus ready jobs over one process's slots; the largest pool decides",
    registers: [registry],
    async collect() {
      await read(
        'platform_worker_processes_desired',
        snapshot,
        (s) => this.set(desiredWorkerProcesses(s, options.slots)),
        () => this.remove(),
      );
    },
  });
  new Gauge({
    name: 'platform_database_up',
    help: '1 when this process reached PostgreSQL at the scrape, else 0',
    registers: [registry],
    async collect() {
      await read(
        'platform_database_up',
        () => db.oneFirst(sql.type(z.object({ ok: z.number() }))`select 1 as ok`),
        () => this.set(1),
        () => this.set(0),
      );
    },
  });
}
