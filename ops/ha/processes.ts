// The HA cluster's child processes (etcd, Patroni, HAProxy): each logs to a file in the scratch directory and
// is killed when this process exits, so a failed run leaves nothing running.
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, readFileSync } from 'node:fs';
import path from 'node:path';
import { sleep } from '../bench/measure.ts';
import type { postgresUserIds } from '../embedded-postgres-cluster.ts';
import type { Member } from './config.ts';

const children = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of children) child.kill('SIGKILL');
});

export type Proc = { child: ChildProcess; exited: Promise<void> };

/** Runs `command` in `dir`, its output appended to <dir>/<name>.log; asPostgres: as the postgres user when root. */
export function spawnLogged(
  dir: string,
  ids: ReturnType<typeof postgresUserIds>,
  name: string,
  command: string,
  args: string[],
  asPostgres = false,
): Proc {
  const child = spawn(command, args, {
    cwd: dir,
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: dir, LANG: 'C.UTF-8' },
    stdio: ['ignore', 'pipe', 'pipe'],
    ...(asPostgres && 'uid' in ids ? { uid: ids.uid, gid: ids.gid } : {}),
  });
  children.add(child);
  const log = createWriteStream(path.join(dir, `${name}.log`), { flags: 'a' });
  child.stdout!.pipe(log, { end: false });
  child.stderr!.pipe(log, { end: false });
  const exited = new Promise<void>((resolve) =>
    child.once('exit', () => {
      children.delete(child);
      resolve();
    }),
  );
  return { child, exited };
}

/** A single-member etcd's command line, its data under `dir`. */
export function etcdArguments(dir: string, { client, peer }: { client: number; peer: number }): string[] {
  return [
    '--name',
    'etcd0',
    '--data-dir',
    path.join(dir, 'etcd'),
    '--listen-client-urls',
    `http://127.0.0.1:${client}`,
    '--advertise-client-urls',
    `http://127.0.0.1:${client}`,
    '--listen-peer-urls',
    `http://127.0.0.1:${peer}`,
    '--initial-advertise-peer-urls',
    `http://127.0.0.1:${peer}`,
    '--initial-cluster',
    `etcd0=http://127.0.0.1:${peer}`,
    '--logger',
    'zap',
    '--log-level',
    'warn',
  ];
}

/** The pid of a member's PostgreSQL, from its data directory (null: not running or unreadable). */
export function postmasterPid(m: Member): number | null {
  try {
    return Number(readFileSync(path.join(m.dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]) || null;
  } catch {
    return null;
  }
}

/** SIGTERM to every process (SIGKILL after 15 s), then SIGKILL to any member's PostgreSQL left behind. */
export async function stopProcesses(procs: Proc[], members: readonly Member[]): Promise<void> {
  for (const p of procs) p.child.kill('SIGTERM');
  const deadline = sleep(15_000).then(() => {
    for (const p of procs) p.child.kill('SIGKILL');
  });
  await Promise.race([Promise.all(procs.map((p) => p.exited)), deadline]);
  for (const m of members) {
    const pid = postmasterPid(m);
    if (pid) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone with its Patroni
      }
    }
  }
}
