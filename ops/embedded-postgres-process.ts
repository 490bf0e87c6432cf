// Who runs a cluster directory: the postmaster (from postmaster.pid, checked
// against /proc) and the live process that started it (DATA_DIR/pg.owner,
// with the command it is, e.g. `npm start`). Also the recovery after a killed
// process that left its postmaster behind.
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Logger } from 'pino';
import { processDataDirectory } from './embedded-postgres-cluster.ts';

/** A start that failed for a reason the operator can fix (port taken, server refused, directory in use). */
export class EmbeddedPostgresError extends Error {
  override name = 'EmbeddedPostgresError';
}

export function processAlive(pid: number): boolean {
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

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const ownerFile = (directory: string) => `${directory}.owner`;

/** Who started the server: written next to the cluster once it is up, removed when it stops. */
export type ClusterOwner = { pid: number; command: string };

export function writeOwner(directory: string, command: string): void {
  writeFileSync(ownerFile(directory), JSON.stringify({ pid: process.pid, command } satisfies ClusterOwner) + '\n');
}

export function removeOwner(directory: string): void {
  rmSync(ownerFile(directory), { force: true });
}

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

/**
 * A previous process that was killed can leave its postmaster running (it is a
 * separate process) or leave a postmaster.pid behind. Stop the orphan; remove a
 * pid file whose process is gone or is not a postgres of this directory.
 */
export async function recoverFromPreviousRun(directory: string, logger?: Logger): Promise<void> {
  const pidFile = path.join(directory, 'postmaster.pid');
  if (!existsSync(pidFile)) return;
  const pid = liveServer(directory)?.pid;
  if (pid !== undefined) {
    logger?.warn({ postmasterPid: pid }, 'embedded postgres: stopping a postmaster left running by a previous process');
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
