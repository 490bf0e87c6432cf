// `npm run db`: the embedded PostgreSQL of DATA_DIR on its own, in the
// foreground, migrated, for running the api and workers as separate
// processes on a laptop: `npm run start:api` and `npm run start:worker` with
// DATABASE_URL unset find it through DATA_DIR. Ctrl-C (or SIGTERM, SIGHUP)
// stops it; they wait for it to come back on the same port.
import path from 'node:path';
import { loadConfigOrExit } from '../core/config.ts';
import { migrate } from '../core/db/migrate.ts';
import { createLogger } from '../core/logger.ts';
import { commandLine } from '../core/process/command-line.ts';
import { exitWithError, guardUnhandledRejections, onShutdownSignal } from '../core/process/lifecycle.ts';
import { refuseIfInUse, startEmbeddedPostgres, type EmbeddedDatabase } from './embedded-postgres.ts';

commandLine(
  `
usage: npm run db
Runs the embedded PostgreSQL of DATA_DIR (default ./.data) on its own, migrated,
until Ctrl-C. In other terminals, with DATABASE_URL unset and the same
DATA_DIR, npm run start:api and npm run start:worker use it: the api and any
number of workers as separate processes, as in production.`,
  {},
);
const config = loadConfigOrExit();
const logger = createLogger(config.logLevel, 'db', { format: config.logFormat, nodeEnv: config.nodeEnv });
guardUnhandledRejections(logger);
let embedded: EmbeddedDatabase | null = null;
try {
  if (config.databaseUrl)
    throw new Error(
      'DATABASE_URL is set: npm run db runs the embedded PostgreSQL of DATA_DIR; unset DATABASE_URL, or use your server as it is',
    );
  const directory = path.join(config.dataDir, 'pg');
  refuseIfInUse(directory);
  embedded = await startEmbeddedPostgres({
    directory,
    port: config.embeddedPgPort,
    logger,
    command: 'npm run db',
    exclusive: true,
  });
  await migrate(embedded.url, logger);
  logger.info(
    { directory: embedded.directory, port: embedded.port },
    `embedded postgres ready; in other terminals (same DATA_DIR, DATABASE_URL unset): npm run start:api, npm run start:worker`,
  );
  const running = embedded;
  onShutdownSignal(logger, config.shutdownTimeoutMs, async () => {
    await running.stop();
    logger.info('embedded postgres stopped');
  });
} catch (error) {
  await embedded?.stop().catch(() => undefined);
  exitWithError(logger, error);
}
