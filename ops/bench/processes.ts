// Platform entries (api/server.ts, workers/runner.ts) as child processes of
// the bench, started exactly as `npm run start:api` / `start:worker` do. Every
// child is stopped by the bench, and killed if the bench itself exits first.
import { spawn, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import path from 'node:path';
import { sleep } from './measure.ts';

const root = path.resolve(import.meta.dirname, '../..');
const running = new Set<ChildProcess>();
// Last resort (the bench threw past its finally, or exited early): no child outlives it.
process.once('exit', () => {
  for (const child of running) child.kill('SIGKILL');
});

export type PlatformProcess = {
  name: string;
  child: ChildProcess;
  /** Resolves once a JSON log line has this `msg`; rejects if the process exits first. */
  logged: (msg: string, timeoutMs?: number) => Promise<void>;
  /** The end of what it printed, for error messages. */
  tail: () => string;
  exited: Promise<number | null>;
};

export function spawnEntry(name: string, entry: string, env: Record<string, string>): PlatformProcess {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(root, entry)], {
    cwd: root,
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  running.add(child);
  let output = '';
  const exited = new Promise<number | null>((resolve) => {
    child.once('exit', (code) => {
      running.delete(child);
      resolve(code);
    });
    // Could not be started at all (no 'exit' follows).
    child.once('error', (error) => {
      running.delete(child);
      output += `\n${error.message}`;
      resolve(null);
    });
  });
  let partial = '';
  const seen = new Set<string>();
  const waiters = new Map<string, () => void>();
  const keep = (text: string) => (output = (output + text).slice(-4000));
  child.stderr!.setEncoding('utf8').on('data', keep);
  child.stdout!.setEncoding('utf8').on('data', (data: string) => {
    keep(data);
    const lines = (partial + data).split('\n');
    partial = lines.pop() ?? '';
    for (const line of lines) {
      try {
        const msg = (JSON.parse(line) as { msg?: unknown }).msg;
        if (typeof msg !== 'string') continue;
        seen.add(msg);
        waiters.get(msg)?.();
      } catch {
        // not a JSON log line
      }
    }
  });
  const tail = () => output.trim().split('\n').slice(-12).join('\n');
  const logged = (msg: string, timeoutMs = 60_000) =>
    seen.has(msg)
      ? Promise.resolve()
      : new Promise<void>((resolve, reject) => {
          const timer = setTimeout(() => fail(`did not log "${msg}" within ${timeoutMs} ms`), timeoutMs);
          const fail = (why: string) => {
            clearTimeout(timer);
            waiters.delete(msg);
            reject(new Error(`${name} ${why}:\n${tail()}`));
          };
          waiters.set(msg, () => {
            clearTimeout(timer);
            waiters.delete(msg);
            resolve();
          });
          void exited.then((code) => waiters.has(msg) && fail(`exited (code ${code})`));
        });
  return { name, child, logged, tail, exited };
}

function getStatus(port: number, route: string): Promise<number> {
  return new Promise((resolve) => {
    const req = http.get({ host: '127.0.0.1', port, path: route, agent: false, timeout: 1_000 }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(0));
  });
}

/** Polls GET /healthz on the process's port until it answers 200. */
export async function waitForHealth(proc: PlatformProcess, port: number, timeoutMs = 60_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while ((await getStatus(port, '/healthz')) !== 200) {
    if (proc.child.exitCode !== null || proc.child.signalCode !== null)
      throw new Error(`${proc.name} exited before answering /healthz:\n${proc.tail()}`);
    if (performance.now() > deadline)
      throw new Error(`${proc.name} did not answer /healthz within ${timeoutMs} ms:\n${proc.tail()}`);
    await sleep(50);
  }
}

/** SIGTERM to all, then SIGKILL to whoever has not exited after `graceMs`. */
export async function stopAll(procs: readonly PlatformProcess[], graceMs = 15_000): Promise<void> {
  await Promise.all(
    procs.map(async (p) => {
      if (p.child.exitCode !== null || p.child.signalCode !== null) return;
      p.child.kill('SIGTERM');
      const timer = setTimeout(() => p.child.kill('SIGKILL'), graceMs);
      await p.exited;
      clearTimeout(timer);
    }),
  );
}
