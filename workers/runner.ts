// The worker process: `npm run start:worker` (needs DATABASE_URL). Run as
// many as the work needs; Graphile Worker hands each job to one of them and
// its cron fires each schedule once across all of them.
import { commandLine } from '../core/process/command-line.ts';
import { databaseUrlFor } from '../core/db/local-cluster.ts';
import { loadConfigOrExit } from '../core/config.ts';
import { createLogger } from '../core/logger.ts';
import { collectProcessMetrics, maybeStartMetricsServer, registerDatabaseMetrics } from '../core/metrics.ts';
import {
  ensureSchema,
  exitWithError,
  guardUnhandledRejections,
  isMain,
  onShutdownSignal,
} from '../core/process/lifecycle.ts';
import { queueMetricsOptions } from '../core/queue-metrics.ts';

async function main() {
  commandLine(
    `
usage: npm run start:worker
A worker process (needs DATABASE_URL and a migrated database); run as many
as the work needs. Configured by environment variables: WORKER_CONCURRENCY,
WORKER_IO_CONCURRENCY, DATABASE_URL, ... (docs/configuration.md).`,
    {},
  );
  const config = loadConfigOrExit();
  const logger = createLogger(config.logLevel, 'worker', { format: config.logFormat, nodeEnv: config.nodeEnv });
  guardUnhandledRejections(logger);
  try {
    // DATABASE_URL, or the embedded PostgreSQL `npm run db` runs for DATA_DIR.
    const databaseUrl = databaseUrlFor(config, 'npm run start:worker', logger);
    await ensureSchema(config, databaseUrl, logger);
    // Loaded once the checks passed: a refused start answers without loading every task.
    const { startWorker } = await import('./worker.ts');
    const worker = await startWorker({ config, databaseUrl, logger });
    // Besides its job durations, a worker shows the queue it drains (to size the worker count).
    collectProcessMetrics(worker.metrics);
    registerDatabaseMetrics(
      worker.metrics,
      worker.db,
      logger.child({ component: 'metrics' }),
      queueMetricsOptions(config.worker),
    );
    const metricsServer = await maybeStartMetricsServer(config.metrics, () => [worker.metrics], logger);
    onShutdownSignal(logger, config.shutdownTimeoutMs, async () => {
      await metricsServer?.close();
      await worker.stop();
    });
  } catch (error) {
    exitWithError(logger, error);
  }
}

if (isMain(import.meta.url)) void main();
