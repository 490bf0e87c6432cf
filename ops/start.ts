// `npm start`: the whole platform in one process for a laptop. With
// DATABASE_URL unset it runs on an embedded PostgreSQL kept in DATA_DIR/pg
// (reused on the next start); it migrates, then serves the api and runs a
// worker. Ctrl-C stops the api, then the worker, then the database.
import path from 'node:path';
import { startApi } from '../api/start-api.ts';
import { loadConfigOrExit } from '../core/config.ts';
import { migrate } from '../core/db/migrate.ts';
import { createLogger, safeDatabaseUrl } from '../core/logger.ts';
import { collectProcessMetrics, maybeStartMetricsServer } from '../core/metrics.ts';
import { settleListenPort } from '../core/process/listen-port.ts';
import { commandLine } from '../core/process/command-line.ts';
import { exitWithError, guardUnhandledRejections, onShutdownSignal } from '../core/process/lifecycle.ts';
import { refuseIfInUse, startEmbeddedPostgres, type EmbeddedDatabase } from './embedded-postgres.ts';

commandLine(
  `
usage: npm start
The whole platform in one process: api, a worker and (with DATABASE_URL unset)
an embedded PostgreSQL kept in DATA_DIR (default ./.data). Configured by
environment variables: PORT (3000), HOST, DATA_DIR, DATABASE_URL, ...
(docs/configuration.md). Ctrl-C stops it.`,
  {},
);
const loaded = loadConfigOrExit();
const logger = createLogger(loaded.logLevel, 'platform', { format: loaded.logFormat, nodeEnv: loaded.nodeEnv });
guardUnhandledRejections(logger);
let embedded: EmbeddedDatabase | null = null;
try {
  // A DATA_DIR another `npm start` (or `npm run db`) runs, or a busy port,
  // stops us here, before the database starts or a worker takes a job.
  if (!loaded.databaseUrl) refuseIfInUse(path.join(loaded.dataDir, 'pg'));
  const config = await settleListenPort(loaded);
  if (!config.databaseUrl) {
    embedded = await startEmbeddedPostgres({
      directory: path.join(config.dataDir, 'pg'),
      port: config.embeddedPgPort,
      logger,
      command: 'npm start',
      exclusive: true,
    });
    logger.info({ port: embedded.port, directory: path.join(config.dataDir, 'pg') }, 'embedded postgres running');
  }
  const databaseUrl = config.databaseUrl ?? embedded!.url;
  logger.info({ database: safeDatabaseUrl(databaseUrl) }, 'migrating');
  await migrate(databaseUrl, logger);
  const { startWorker } = await import('../workers/worker.ts');
  const worker = await startWorker({ config, databaseUrl, logger: logger.child({ process: 'worker' }) });
  const api = await startApi(config, databaseUrl, logger.child({ process: 'api' }));
  logger.info({ url: api.url, baseUrl: config.baseUrl }, 'platform ready');
  // One process, one exposition: the api's registry (with the database gauges) and the worker's.
  collectProcessMetrics(api.app.metrics.registry);
  const metricsServer = await maybeStartMetricsServer(
    config.metrics,
    () => [api.app.metrics.registry, worker.metrics],
    logger,
  );
  onShutdownSignal(logger, config.shutdownTimeoutMs, async () => {
    await api.stop();
    await metricsServer?.close();
    await worker.stop();
    await embedded?.stop();
    logger.info('platform stopped');
  });
} catch (error) {
  await embedded?.stop().catch(() => undefined);
  exitWithError(logger, error);
}
