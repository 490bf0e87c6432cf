// Process plumbing shared by the entries (api, worker, all-in-one, migrate).
import { pathToFileURL } from 'node:url';
import type { Logger } from 'pino';
import type { Config } from '../config.ts';
import { createDatabasePool } from '../db/pool.ts';
import { migrate, migrationState } from '../db/migrate.ts';

/** True when the module is the script node was started with. */
export function isMain(importMetaUrl: string): boolean {
  return process.argv[1] !== undefined && importMetaUrl === pathToFileURL(process.argv[1]).href;
}

/**
 * Runs `shutdown` once on SIGINT/SIGTERM, then exits. A second signal, or a
 * shutdown that outlives the timeout, exits at once.
 */
export function onShutdownSignal(logger: Logger, timeoutMs: number, shutdown: (signal: string) => Promise<void>): void {
  let started = false;
  const handler = (signal: NodeJS.Signals) => {
    if (started) {
      logger.warn({ signal }, 'second signal: exiting now');
      process.exit(1);
    }
    started = true;
    logger.info({ signal }, 'shutting down');
    const force = setTimeout(() => {
      logger.error({ timeoutMs }, 'shutdown took too long; exiting');
      process.exit(1);
    }, timeoutMs + 5_000);
    force.unref();
    shutdown(signal)
      .then(() => process.exit(0))
      .catch((error) => {
        logger.error({ err: error }, 'shutdown failed');
        process.exit(1);
      });
  };
  process.once('SIGINT', handler);
  process.once('SIGTERM', handler);
}

export class UnmigratedDatabaseError extends Error {
  override name = 'UnmigratedDatabaseError';
}

/**
 * In production a process refuses a database whose schema is behind (run
 * `npm run migrate` as a release step). Elsewhere it migrates by itself; the
 * advisory lock lets several processes do so at once safely.
 */
export async function ensureSchema(config: Config, databaseUrl: string, logger: Logger): Promise<void> {
  if (config.nodeEnv !== 'production') {
    await migrate(databaseUrl, logger);
    return;
  }
  const db = await createDatabasePool(databaseUrl, { maximumPoolSize: 1 });
  try {
    const state = await migrationState(db);
    if (!state.current) {
      const missing = [...state.pending, ...(state.workerSchemaCurrent ? [] : ['graphile-worker schema'])];
      throw new UnmigratedDatabaseError(
        `The database schema is not current (missing: ${missing.join(', ')}). Run \`npm run migrate\` against this DATABASE_URL first.`,
      );
    }
  } finally {
    await db.end();
  }
}

/** Refusals an operator can act on: reported as their message, without a stack. */
const EXPECTED = new Set(['ConfigError', 'UnmigratedDatabaseError', 'EmbeddedPostgresError']);

/** Last words of a process that cannot start: one clear line, exit code 1. */
export function exitWithError(logger: Logger | null, error: unknown): never {
  const message = error instanceof Error ? error.message : String(error);
  const expected = error instanceof Error && EXPECTED.has(error.name);
  if (logger) logger.fatal(expected ? {} : { err: error }, message);
  process.stderr.write(`error: ${message}\n`);
  process.exit(1);
}
