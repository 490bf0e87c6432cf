// The database of `npm run start:api` and `npm run start:worker`:
// DATABASE_URL, or with it unset the embedded PostgreSQL that another
// process runs for DATA_DIR (`npm run db`, or `npm start`). They never start
// one themselves: the server's life belongs to the process that owns it.
import path from 'node:path';
import type { Logger } from 'pino';
import { ConfigError, type Config } from '../core/config.ts';
import { describeOwner, runningCluster } from './embedded-postgres.ts';

export function databaseUrlFor(config: Config, processName: string, logger: Logger): string {
  if (config.databaseUrl) return config.databaseUrl;
  const shared = runningCluster(path.join(config.dataDir, 'pg'));
  if (!shared) {
    throw new ConfigError(
      `Invalid configuration:\n  DATABASE_URL: required for ${processName}, or run \`npm run db\` in another terminal (the embedded PostgreSQL of DATA_DIR=${config.dataDir}, which ${processName} then uses); \`npm start\` runs everything in one process`,
    );
  }
  logger.info({ directory: path.resolve(config.dataDir, 'pg'), server: describeOwner(shared.server) }, 'using the embedded PostgreSQL of DATA_DIR');
  return shared.url;
}
