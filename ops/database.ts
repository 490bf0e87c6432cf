// For ops commands: the configured DATABASE_URL, or the embedded PostgreSQL
// (the server `npm start` is running, or one started just for the command),
// migrated, with a slonik pool. Call close() when done.
import path from 'node:path';
import type { Logger } from 'pino';
import type { Config } from '../core/config.ts';
import { migrate } from '../core/db/migrate.ts';
import { createDatabasePool, type DatabasePool } from '../core/db/pool.ts';
import { startEmbeddedPostgres } from './embedded-postgres.ts';

export async function openDatabase(
  config: Config,
  logger: Logger,
): Promise<{ db: DatabasePool; url: string; close: () => Promise<void> }> {
  const embedded = config.databaseUrl
    ? null
    : await startEmbeddedPostgres({
        directory: path.join(config.dataDir, 'pg'),
        port: config.embeddedPgPort,
        logger,
        command: 'an ops command',
      });
  const url = config.databaseUrl ?? embedded!.url;
  try {
    await migrate(url, logger);
    const db = await createDatabasePool(url, { maximumPoolSize: 2 });
    return {
      db,
      url,
      close: async () => {
        await db.end();
        await embedded?.stop();
      },
    };
  } catch (error) {
    await embedded?.stop();
    throw error;
  }
}
