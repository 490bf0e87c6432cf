// How a process starts: the api through tsx (the npm scripts, development)
// against the same api compiled (`npm run build`, what production runs):
// seconds from spawn to its first readiness answer, the CPU it spent getting
// there, and its resident memory once ready. Each is the median of a few
// starts, one at a time, on the bench's database.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, cpSync } from 'node:fs';
import path from 'node:path';
import { compileTree, RUNTIME_DIRS } from '../compile.ts';
import { sleep } from './measure.ts';

const root = path.resolve(import.meta.dirname, '../..');
export type StartFigures = { seconds: number; cpuSeconds: number; rssMb: number };

/** One start of `args` (after node): until GET /readyz answers 200, then stopped. */
async function startOnce(args: string[], env: Record<string, string>): Promise<StartFigures> {
  const started = performance.now();
  const child = spawn(process.execPath, args, {
    cwd: root,
    env: { PATH: process.env.PATH ?? '', ...env, LOG_LEVEL: 'info', LOG_FORMAT: 'json' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  try {
    let output = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (output += d));
    let url: string | undefined;
    for (;;) {
      url = /"url":"(http:\/\/[^"]+)".*"api listening"/.exec(output)?.[1];
      if (url) break;
      if (child.exitCode !== null) throw new Error(`the api exited with ${child.exitCode}: ${output.slice(-1000)}`);
      await sleep(5);
    }
    while (
      (await fetch(`${url}/readyz`).then(
        (r) => r.status,
        () => 0,
      )) !== 200
    )
      await sleep(5);
    const seconds = (performance.now() - started) / 1000;
    const status = readFileSync(`/proc/${child.pid}/status`, 'utf8');
    const stat = readFileSync(`/proc/${child.pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    const ticks = Number(stat[11]) + Number(stat[12]); // utime + stime, in clock ticks (100 a second on Linux)
    return { seconds, cpuSeconds: ticks / 100, rssMb: Number(/VmRSS:\s+(\d+)/.exec(status)![1]) / 1024 };
  } finally {
    child.kill('SIGTERM');
    await new Promise((r) => child.once('exit', r));
  }
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

function medians(runs: StartFigures[]): StartFigures {
  return {
    seconds: median(runs.map((r) => r.seconds)),
    cpuSeconds: median(runs.map((r) => r.cpuSeconds)),
    rssMb: median(runs.map((r) => r.rssMb)),
  };
}

export async function startFigures(
  env: Record<string, string>,
  starts = 5,
): Promise<{ tsx: StartFigures; compiled: StartFigures }> {
  // Compiled beside the checkout, so packages resolve from its node_modules as dist/'s do.
  const dist = mkdtempSync(path.join(root, '.bench-dist-'));
  try {
    await compileTree(root, dist, RUNTIME_DIRS, { sourceMaps: true });
    cpSync(path.join(root, 'sql'), path.join(dist, 'sql'), { recursive: true });
    const tsx: StartFigures[] = [];
    const compiled: StartFigures[] = [];
    for (let i = 0; i < starts; i++) {
      tsx.push(await startOnce(['--import', 'tsx', path.join(root, 'api/server.ts')], env));
      compiled.push(await startOnce(['--enable-source-maps', path.join(dist, 'api/server.js')], env));
    }
    return { tsx: medians(tsx), compiled: medians(compiled) };
  } finally {
    rmSync(dist, { recursive: true, force: true });
  }
}
