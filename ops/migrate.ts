// `npm run migrate`: applies pending migrations (Graphile Worker's, then ours)
// to DATABASE_URL, or to the embedded PostgreSQL when DATABASE_URL is unset.
import path from 'node:path';
import { loadConfigOrExit } from '../core/config.ts';
import { migrate } from '../core/db/migrate.ts';
import { createLogger } from '../core/logger.ts';
import { exitWithError } from '../core/process/lifecycle.ts';
import { commandLine } from '../core/process/command-line.ts';
import { startEmbeddedPostgres } from './embedded-postgres.ts';

commandLine(
  `
usage: npm run migrate
Applies pending migrations (Graphile Worker's, then the platform's) to
DATABASE_URL, or to the embedded PostgreSQL of DATA_DIR when it is unset.`,
  {},
);
const config = loadConfigOrExit();
const logger = createLogger(config.logLevel, 'migrate');
try {
  const embedded = config.databaseUrl
    ? null
    : await startEmbeddedPostgres({
        directory: path.join(config.dataDir, 'pg'),
        port: config.embeddedPgPort,
        logger,
        command: 'npm run migrate',
      });
  try {
    const { applied } = await migrate(config.databaseUrl ?? embedded!.url, logger);
    logger.info({ applied: applied.length }, applied.length ? 'migrations applied' : 'database schema already current');
  } finally {
    await embedded?.stop();
  }
} catch (error) {
  exitWithError(logger, error);
}
