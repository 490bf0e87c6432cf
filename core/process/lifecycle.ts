// Process plumbing shared by the entries (api, worker, all-in-one, migrate).
import { pathToFileURL } from 'node:url';
import type { Logger } from 'pino';
import type { Config } from '../config.ts';
import { createDatabasePool } from '../db/pool.ts';
import { migrate, migrationState } from '../db/migrate.ts';
import { isDatabaseUnavailable } from '../db/unavailable.ts';

/** True when the module is the script node was started with. */
export function isMain(importMetaUrl: string): boolean {
  return process.argv[1] !== undefined && importMetaUrl === pathToFileURL(process.argv[1]).href;
}

/**
 * A terminal's Ctrl-C reaches every process of the foreground group, and npm
 * forwards the signal it got as well: one key press arrives as two signals
 * within milliseconds. Signals inside this window count as one.
 */
const SIGNAL_COALESCE_MS = 1_000;

/**
 * Runs `shutdown` once on SIGINT/SIGTERM, then exits. A repeated signal
 * arriving after the coalescing window, or a shutdown that outlives the
 * timeout, exits at once.
 */
export function onShutdownSignal(logger: Logger, timeoutMs: number, shutdown: (signal: string) => Promise<void>): void {
  let startedAt = 0;
  const handler = (signal: NodeJS.Signals) => {
    if (startedAt) {
      if (Date.now() - startedAt < SIGNAL_COALESCE_MS) return; // the same Ctrl-C, delivered twice
      logger.warn({ signal }, 'second signal: exiting now');
      process.exit(1);
    }
    startedAt = Date.now();
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
  // `on`, not `once`: after the first signal Node's default action (exit at
  // once) must never come back for the duplicate.
  process.on('SIGINT', handler);
  process.on('SIGTERM', handler);
  // A closed terminal: stop as gracefully as on Ctrl-C (the embedded
  // PostgreSQL runs in a session of its own and would be left running).
  process.on('SIGHUP', handler);
}

const lostDatabaseWork = new Set<(error: unknown) => void>();

/**
 * Called with every rejection that escaped because the database went away
 * (Graphile Worker does not await the release of a finished job); the
 * worker uses it to recover what such a release left locked.
 */
export function onLostDatabaseWork(listener: (error: unknown) => void): () => void {
  lostDatabaseWork.add(listener);
  return () => lostDatabaseWork.delete(listener);
}

/** Hands a rejection caused by an unreachable database to the recoverers. */
export function reportLostDatabaseWork(error: unknown): void {
  for (const listener of lostDatabaseWork) listener(error);
}

/**
 * Installed by every process entry. A promise rejected because PostgreSQL is
 * unreachable must never end the process: it is logged and handed to whoever
 * recovers from it. Any other unhandled rejection is a bug and keeps Node's
 * meaning: the process stops (a supervisor restarts a clean one).
 */
export function guardUnhandledRejections(logger: Logger): void {
  process.on('unhandledRejection', (reason) => {
    if (isDatabaseUnavailable(reason)) {
      logger.warn(
        { reason: (reason as Error)?.message },
        'database unreachable: an operation failed and will be recovered',
      );
      reportLostDatabaseWork(reason);
      return;
    }
    logger.fatal({ err: reason }, 'unhandled promise rejection; stopping');
    process.exit(1);
  });
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
const EXPECTED = new Set(['ConfigError', 'UnmigratedDatabaseError', 'EmbeddedPostgresError', 'ListenPortError']);

/** Last words of a process that cannot start: one clear line, exit code 1. */
export function exitWithError(logger: Logger | null, error: unknown): never {
  const message = error instanceof Error ? error.message : String(error);
  const expected = error instanceof Error && EXPECTED.has(error.name);
  // One line per event: the logger's when it writes fatal lines, else a plain one on stderr.
  if (logger?.isLevelEnabled('fatal')) logger.fatal(expected ? {} : { err: error }, message);
  else process.stderr.write(`error: ${message}\n`);
  process.exit(1);
}
