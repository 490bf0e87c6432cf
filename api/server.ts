// The api process: `npm run start:api` (needs DATABASE_URL). Scale it by
// running more of them behind a load balancer; they share nothing but PostgreSQL.
import { commandLine } from '../core/process/command-line.ts';
import { databaseUrlFor } from '../core/db/local-cluster.ts';
import { loadConfigOrExit } from '../core/config.ts';
import { createLogger } from '../core/logger.ts';
import { collectProcessMetrics, maybeStartMetricsServer } from '../core/metrics.ts';
import { settleListenPort } from '../core/process/listen-port.ts';
import {
  ensureSchema,
  exitWithError,
  guardUnhandledRejections,
  isMain,
  onShutdownSignal,
} from '../core/process/lifecycle.ts';
import { startApi } from './start-api.ts';

async function main() {
  commandLine(
    `
usage: npm run start:api
The api process alone (needs DATABASE_URL and a migrated database; run
workers beside it with npm run start:worker). Configured by environment
variables: PORT, HOST, BASE_URL, DATABASE_URL, ... (docs/configuration.md).`,
    {},
  );
  const loaded = loadConfigOrExit();
  const logger = createLogger(loaded.logLevel, 'api', { format: loaded.logFormat, nodeEnv: loaded.nodeEnv });
  guardUnhandledRejections(logger);
  try {
    const config = await settleListenPort(loaded);
    // DATABASE_URL, or the embedded PostgreSQL `npm run db` runs for DATA_DIR.
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
