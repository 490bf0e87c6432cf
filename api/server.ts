// The api process: `npm run start:api` (needs DATABASE_URL). Scale it by
// running more of them behind a load balancer; they share nothing but PostgreSQL.
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { commandLine } from '../core/process/command-line.ts';
import { loadConfigOrExit, type Config } from '../core/config.ts';
import { createDatabasePool } from '../core/db/pool.ts';
import { JobEventHub } from '../core/jobs/events.ts';
import { GroupCommitter } from '../core/jobs/group-commit.ts';
import { createLogger, logStream } from '../core/logger.ts';
import { collectProcessMetrics, maybeStartMetricsServer } from '../core/metrics.ts';
import { settleListenPort } from '../core/process/listen-port.ts';
import { ensureSchema, exitWithError, guardUnhandledRejections, isMain, onShutdownSignal } from '../core/process/lifecycle.ts';
import { keepFoldingAccountCounts } from '../core/jobs/counts.ts';

/** How often the api folds the accounts' job count changes (core/jobs/counts.ts). */
const COUNT_FOLD_MS = 2_000;

export type RunningApi = { app: FastifyInstance; url: string; stop: () => Promise<void> };

export async function startApi(config: Config, databaseUrl: string, logger: Logger): Promise<RunningApi> {
  const db = await createDatabasePool(databaseUrl, { maximumPoolSize: config.dbPoolMax });
  const jobEvents = new JobEventHub(databaseUrl, db, logger.child({ component: 'job-events' }));
  try {
    await jobEvents.start();
  } catch (error) {
    await db.end();
    throw error;
  }
  const jobs = new GroupCommitter(db, { logger });
  const stopFolding = keepFoldingAccountCounts(db, logger, COUNT_FOLD_MS);
  // Loaded here, not at the top: the entries' refusals (bad settings, no
  // database, busy port, old schema) answer without loading every route.
  const { buildApp } = await import('./app.ts');
  // Request logs as readable lines where LOG_FORMAT asks for them (JSON otherwise).
  const app = await buildApp({ config, db, jobEvents, jobs }, { logStream: logStream({ format: config.logFormat, nodeEnv: config.nodeEnv }) });
  const url = await app.listen({ host: config.host, port: config.port });
  let stopping: Promise<void> | null = null;
  const stop = () =>
    (stopping ??= (async () => {
      // Stop accepting, let in-flight requests finish, close websockets with
      // a close frame; then the LISTEN connection and the pool.
      await app.close();
      stopFolding();
      await jobEvents.stop();
      // slonik's end() throws when a connection died during a database
      // outage; everything else is closed by now, so it must not fail the stop.
      await db.end().catch((error) => logger.debug({ err: error }, 'database pool ended with an error'));
    })());
  return { app, url, stop };
}

async function main() {
  commandLine(`
usage: npm run start:api
The api process alone (needs DATABASE_URL and a migrated database; run
workers beside it with npm run start:worker). Configured by environment
variables: PORT, HOST, BASE_URL, DATABASE_URL, ... (docs/configuration.md).`, {});
  const loaded = loadConfigOrExit();
  const logger = createLogger(loaded.logLevel, 'api', { format: loaded.logFormat, nodeEnv: loaded.nodeEnv });
  guardUnhandledRejections(logger);
  try {
    const config = await settleListenPort(loaded);
    // DATABASE_URL, or the embedded PostgreSQL `npm run db` runs for DATA_DIR.
    const { databaseUrlFor } = await import('../ops/shared-database.ts');
    const databaseUrl = databaseUrlFor(config, 'npm run start:api', logger);
    await ensureSchema(config, databaseUrl, logger);
    const api = await startApi(config, databaseUrl, logger);
    logger.info({ url: api.url, baseUrl: config.baseUrl }, 'api listening');
    collectProcessMetrics(api.app.metrics.registry);
    const metricsServer = await maybeStartMetricsServer(config.metrics, () => [api.app.metrics.registry], logger);
    onShutdownSignal(logger, config.shutdownTimeoutMs, async () => {
      await api.stop();
      await metricsServer?.close();
    });
  } catch (error) {
    exitWithError(logger, error);
  }
}

if (isMain(import.meta.url)) void main();
