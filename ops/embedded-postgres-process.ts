// The owner file of a cluster this process starts (DATA_DIR/pg.owner, with
// the command it is, e.g. `npm start`; read by core/db/local-cluster.ts), and
// the recovery after a killed process that left its postmaster behind.
import { existsSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Logger } from 'pino';
import { liveServer, ownerFile, processAlive, type ClusterOwner } from '../core/db/local-cluster.ts';

/** A start that failed for a reason the operator can fix (port taken, server refused, directory in use). */
export class EmbeddedPostgresError extends Error {
  override name = 'EmbeddedPostgresError';
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export function writeOwner(directory: string, command: string): void {
  writeFileSync(ownerFile(directory), `${JSON.stringify({ pid: process.pid, command } satisfies ClusterOwner)}\n`);
}

export function removeOwner(directory: string): void {
  rmSync(ownerFile(directory), { force: true });
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
    if (processAlive(pid))
      throw new EmbeddedPostgresError(
        `embedded postgres: postmaster ${pid} of ${directory} does not stop; stop it by hand`,
      );
  }
  if (existsSync(pidFile)) {
    logger?.warn('embedded postgres: removing a stale postmaster.pid');
    rmSync(pidFile, { force: true });
  }
}
