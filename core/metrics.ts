// Prometheus metrics. Every process builds its own registries (never
// prom-client's global one), so tests may build several apps and workers in
// one process. The api's registry is made by api/plugins/operations.ts, the
// worker's by startWorker; a process entry serves them on the api's port
// (GET /metrics with METRICS_TOKEN) and/or on a listener of its own
// (METRICS_PORT, see startMetricsServer).
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { Logger } from 'pino';
import { z } from 'zod';
import { sql, type DatabasePool } from './db/pool.ts';
import { registerQueueGauges, type QueueMetricsOptions } from './queue-metrics.ts';

export { Registry };

/** A registry of our own (one per app or worker; never prom-client's global one). */
export function createMetricsRegistry(): Registry {
  return new Registry();
}

/** Node's process metrics (CPU, memory, event loop lag, GC) on a registry; call once per process. */
export function collectProcessMetrics(registry: Registry): void {
  collectDefaultMetrics({ register: registry });
}

// A scrape must answer even while PostgreSQL does not.
const SCRAPE_QUERY_TIMEOUT_MS = 3_000;
function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`metrics query took longer than ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

const JobCount = z.object({ kind: z.string(), status: z.string(), n: z.number() });
const Depth = z.object({ n: z.number() });

/**
 * platform_jobs{kind,status} and platform_queue_depth, read from the database
 * at scrape time. On a database error the gauge stays unset for that scrape
 * and platform_metrics_scrape_errors_total{source} counts it.
 */
export function registerDatabaseMetrics(
  registry: Registry,
  db: DatabasePool,
  logger?: { warn: (obj: object, msg: string) => void },
  queue?: QueueMetricsOptions,
): void {
  // The reads of the current scrape: the error counter is rendered after them.
  const reads = new Set<Promise<unknown>>();
  let errors: Counter<'source'> | null = null;
  const read = <T>(source: string, query: () => Promise<T>, onValue: (value: T) => void, onError: () => void) => {
    const done = withTimeout(query(), SCRAPE_QUERY_TIMEOUT_MS).then(onValue, (error: unknown) => {
      onError();
      errors?.inc({ source });
      logger?.warn({ err: error, source }, 'metrics: database read failed; gauge left unset');
    });
    reads.add(done);
    return done.finally(() => reads.delete(done));
  };
  new Gauge({
    name: 'platform_jobs',
    help: 'Platform jobs by kind and status (the jobs table, read at scrape time)',
    labelNames: ['kind', 'status'] as const,
    registers: [registry],
    async collect() {
      await read(
        'platform_jobs',
        () => db.any(sql.type(JobCount)`select kind, status, count(*)::int as n from jobs group by kind, status`),
        (rows) => {
          this.reset(); // a kind and status no job has any more disappears
          for (const row of rows) this.set({ kind: row.kind, status: row.status }, row.n);
        },
        () => this.reset(),
      );
    },
  });
  new Gauge({
    name: 'platform_queue_depth',
    help: 'Graphile Worker jobs ready to run now (due, not locked, attempts left)',
    registers: [registry],
    async collect() {
      await read(
        'platform_queue_depth',
        () =>
          db.oneFirst(sql.type(Depth)`
            select count(*)::int as n from graphile_worker.jobs
            where run_at <= now() and locked_at is null and attempts < max_attempts`),
        (n) => this.set(n),
        () => this.remove(), // no sample at all rather than a made-up 0
      );
    },
  });
  if (queue) registerQueueGauges(registry, db, queue, read);
  // Registered last, so a scrape renders it after the reads above have counted their errors.
  errors = new Counter({
    name: 'platform_metrics_scrape_errors_total',
    help: 'Scrapes in which a database-backed metric could not be read',
    labelNames: ['source'] as const,
    registers: [registry],
    async collect() {
      await Promise.all(reads);
    },
  });
}

/** What the api process measures besides the database gauges. */
export type ApiMetrics = {
  registry: Registry;
  httpDuration: Histogram<'method' | 'route' | 'status_code'>;
};

export function registerApiMetrics(
  registry: Registry,
  sources: { websocketConnections: () => number; listenConnected: () => boolean },
): ApiMetrics {
  const httpDuration = new Histogram({
    name: 'http_request_duration_seconds',
    help: 'HTTP requests by method, route pattern and status code',
    labelNames: ['method', 'route', 'status_code'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [registry],
  });
  new Gauge({
    name: 'platform_websocket_connections',
    help: 'Open websocket connections on this api process',
    registers: [registry],
    collect() {
      this.set(sources.websocketConnections());
    },
  });
  new Gauge({
    name: 'platform_listen_connected',
    help: '1 while this api process holds its LISTEN connection for job events, else 0',
    registers: [registry],
    collect() {
      this.set(sources.listenConnected() ? 1 : 0);
    },
  });
  return { registry, httpDuration };
}

/** How an attempt ended (workers/attempt.ts): a result, a failure (final or retried), a wait, a cancel, or another attempt had ended the job. */
export type AttemptOutcome = 'succeeded' | 'failed' | 'waited' | 'cancelled' | 'lost';

/**
 * platform_job_duration_seconds{kind,outcome}: one observation per attempt,
 * from its start to the write that ended it. platform_jobs_refused_total:
 * wake-ups dropped without a platform job.
 */
export function registerWorkerMetrics(registry: Registry): {
  observe: (kind: string, outcome: AttemptOutcome, seconds: number) => void;
  refused: (kind: string, reason: string) => void;
} {
  const refusedJobs = new Counter({
    name: 'platform_jobs_refused_total',
    help: 'Jobs this worker process dropped without running them, by kind and reason (no_platform_job: added with graphile_worker.add_job directly)',
    labelNames: ['kind', 'reason'] as const,
    registers: [registry],
  });
  const duration = new Histogram({
    name: 'platform_job_duration_seconds',
    help: 'Job attempts run by this worker process, by kind and outcome (succeeded, failed, waited, cancelled, lost)',
    labelNames: ['kind', 'outcome'] as const,
    buckets: [0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900],
    registers: [registry],
  });
  return {
    observe: (kind, outcome, seconds) => duration.observe({ kind, outcome }, seconds),
    refused: (kind, reason) => refusedJobs.inc({ kind, reason }),
  };
}

/**
 * platform_worker_slots{pool} and platform_worker_jobs_running{pool}: a
 * worker process's slots per pool (short, io) and the jobs running in them now.
 */
export function registerPoolGauges(
  registry: Registry,
  slots: Record<string, number>,
  running: () => Record<string, number>,
): void {
  new Gauge({
    name: 'platform_worker_slots',
    help: 'Slots of this worker process, by pool (short: WORKER_CONCURRENCY, io: WORKER_IO_CONCURRENCY)',
    labelNames: ['pool'] as const,
    registers: [registry],
    collect() {
      for (const [pool, n] of Object.entries(slots)) this.set({ pool }, n);
    },
  });
  new Gauge({
    name: 'platform_worker_jobs_running',
    help: 'Jobs running in this worker process now, by pool',
    labelNames: ['pool'] as const,
    registers: [registry],
    collect() {
      for (const [pool, n] of Object.entries(running())) this.set({ pool }, n);
    },
  });
}

/** The exposition of several registries (their metric names must not overlap). */
export async function renderMetrics(registries: readonly Registry[]): Promise<string> {
  const parts = await Promise.all(registries.map((r) => r.metrics()));
  return parts.filter((p) => p.trim() !== '').join('\n');
}

export const METRICS_CONTENT_TYPE = Registry.PROMETHEUS_CONTENT_TYPE;

export type MetricsServer = { url: string; close: () => Promise<void> };

/**
 * GET /metrics on a listener of its own (METRICS_PORT), without a token: bind
 * it to a private interface (METRICS_HOST) that only the scraper reaches.
 */
export async function startMetricsServer(options: {
  host: string;
  port: number;
  registries: () => readonly Registry[];
  logger: Logger;
}): Promise<MetricsServer> {
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path !== '/metrics' || (req.method !== 'GET' && req.method !== 'HEAD')) {
      res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' }).end('not found\n');
      return;
    }
    renderMetrics(options.registries()).then(
      (body) => {
        res.writeHead(200, { 'content-type': METRICS_CONTENT_TYPE });
        res.end(req.method === 'HEAD' ? undefined : body);
      },
      (error) => {
        options.logger.error({ err: error }, 'metrics: rendering failed');
        res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' }).end('metrics failed\n');
      },
    );
  });
  server.requestTimeout = 30_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  const url = `http://${host}:${address.port}/metrics`;
  options.logger.info({ url }, 'metrics listening');
  let closing: Promise<void> | null = null;
  const close = () =>
    (closing ??= new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    }));
  return { url, close };
}

/** The METRICS_PORT listener of a process entry, or null when METRICS_PORT is 0. */
export async function maybeStartMetricsServer(
  settings: { host: string; port: number },
  registries: () => readonly Registry[],
  logger: Logger,
): Promise<MetricsServer | null> {
  if (settings.port <= 0) return null;
  return startMetricsServer({ host: settings.host, port: settings.port, registries, logger });
}
