// CPU time spent during a bench phase, by this process (the api, when it runs
// in the bench process) and by the PostgreSQL server: the postmaster and its
// children, sampled every 200 ms while the phase runs, so a backend that
// exits at the end of the phase (a pool closed) still counts with the time
// it had at its last sample. (Reading the times once at each end loses
// backends that exit in between: they are neither alive nor always reaped
// yet.) A backend that lives shorter than a sample interval is missed.
// Linux only (/proc); elsewhere the PostgreSQL figure is null. On this 2-core
// machine both share the cores, so CPU per operation shows a change's effect
// with less noise than operations per second.
import { readdirSync, readFileSync } from 'node:fs';
import { sql, type DatabasePool } from '../../core/db/pool.ts';

const TICKS_PER_SECOND = 100; // USER_HZ: /proc reports clock ticks of 10 ms on Linux

/** CPU seconds (utime + stime) and ppid of a process, or null once it is gone. */
function stat(pid: number): { own: number; ppid: number } | null {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name may hold spaces and parentheses: fields start after the last ')'.
    const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
    const tick = (i: number) => Number(fields[i]) / TICKS_PER_SECOND;
    return { ppid: Number(fields[1]), own: tick(11) + tick(12) };
  } catch {
    return null;
  }
}

/** CPU seconds (own) of the postmaster and each of its live children, by pid. */
function serverProcesses(postmaster: number): Map<number, number> {
  const seconds = new Map<number, number>();
  const main = stat(postmaster);
  if (!main) return seconds;
  seconds.set(postmaster, main.own);
  for (const entry of readdirSync('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || pid === postmaster) continue;
    const s = stat(pid);
    if (s?.ppid === postmaster) seconds.set(pid, s.own);
  }
  return seconds;
}

export type CpuUse = { processSeconds: number; postgresSeconds: number | null };

/** Runs `work` and says how much CPU this process and the PostgreSQL server used meanwhile. */
export async function cpuDuring<T>(db: DatabasePool, work: () => Promise<T>): Promise<{ result: T; cpu: CpuUse }> {
  const backend = Number(await db.oneFirst(sql.unsafe`select pg_backend_pid()`));
  const postmaster = stat(backend)?.ppid ?? null;
  // Per pid: its time when first seen (0 for one born during the phase) and at its latest sample.
  const seen = new Map<number, { first: number; last: number }>();
  const sample = (initial: boolean) => {
    if (postmaster === null) return;
    for (const [pid, seconds] of serverProcesses(postmaster)) {
      const entry = seen.get(pid);
      if (entry) entry.last = seconds;
      else seen.set(pid, { first: initial ? seconds : 0, last: seconds });
    }
  };
  sample(true);
  const sampler = setInterval(() => sample(false), 200);
  const before = process.cpuUsage();
  try {
    const result = await work();
    const used = process.cpuUsage(before);
    sample(false);
    let postgres = 0;
    for (const { first, last } of seen.values()) postgres += last - first;
    return {
      result,
      cpu: {
        processSeconds: (used.user + used.system) / 1e6,
        postgresSeconds: postmaster === null || seen.size === 0 ? null : postgres,
      },
    };
  } finally {
    clearInterval(sampler);
  }
}
