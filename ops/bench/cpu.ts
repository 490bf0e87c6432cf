// CPU time spent during a bench phase, by this process (the api, when it runs
// in the bench process) and by the PostgreSQL server (the postmaster and all
// its children, including those that exit during the phase: the postmaster
// reaps them, so their time moves to its children's totals). Linux only
// (/proc); elsewhere the PostgreSQL figure is null. On this 2-core machine
// both share the cores, so CPU per operation shows a change's effect with
// less noise than operations per second.
import { readdirSync, readFileSync } from 'node:fs';
import { sql, type DatabasePool } from '../../core/db/pool.ts';

const TICKS_PER_SECOND = 100; // USER_HZ: /proc reports clock ticks of 10 ms on Linux

/** utime, stime, cutime, cstime (seconds) and ppid of a process, or null once it is gone. */
function stat(pid: number): { own: number; children: number; ppid: number } | null {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name may hold spaces and parentheses: fields start after the last ')'.
    const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
    const tick = (i: number) => Number(fields[i]) / TICKS_PER_SECOND;
    return { ppid: Number(fields[1]), own: tick(11) + tick(12), children: tick(13) + tick(14) };
  } catch {
    return null;
  }
}

/** Seconds of CPU the server used so far: the postmaster, its live children, and its reaped ones. */
function serverSeconds(postmaster: number): number | null {
  const main = stat(postmaster);
  if (!main) return null;
  let total = main.own + main.children;
  for (const entry of readdirSync('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || pid === postmaster) continue;
    const s = stat(pid);
    if (s?.ppid === postmaster) total += s.own;
  }
  return total;
}

export type CpuUse = { processSeconds: number; postgresSeconds: number | null };

/** Runs `work` and says how much CPU this process and the PostgreSQL server used meanwhile. */
export async function cpuDuring<T>(db: DatabasePool, work: () => Promise<T>): Promise<{ result: T; cpu: CpuUse }> {
  const backend = Number(await db.oneFirst(sql.unsafe`select pg_backend_pid()`));
  const postmaster = stat(backend)?.ppid ?? null;
  const serverBefore = postmaster === null ? null : serverSeconds(postmaster);
  const before = process.cpuUsage();
  const result = await work();
  const used = process.cpuUsage(before);
  const serverAfter = postmaster === null ? null : serverSeconds(postmaster);
  return {
    result,
    cpu: {
      processSeconds: (used.user + used.system) / 1e6,
      postgresSeconds: serverBefore === null || serverAfter === null ? null : serverAfter - serverBefore,
    },
  };
}
