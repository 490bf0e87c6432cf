// A real Graphile Worker for tests: in this process (startTestWorker) or as
// a separate process that a test may kill (spawnWorkerProcess).
import { spawn, type ChildProcess } from 'node:child_process';
import type { JobHelpers } from 'graphile-worker';
import pg from 'pg';
import type { Logger } from 'pino';
import type { Test } from 'tap';
import type { DatabasePool } from '../../core/db/pool.ts';
import { JobCompletions } from '../../core/jobs/completions.ts';
import { DeltaPublisher } from '../../core/jobs/deltas.ts';
import type { CancelListener } from '../../workers/cancellation.ts';
import type { TaskDeps } from '../../workers/define-task.ts';
import { startWorker } from '../../workers/worker.ts';
import { testConfig, testEnv, testLogger } from './config.ts';
import { entryArgs, runRoot } from './paths.ts';

export async function startTestWorker(t: Test, databaseUrl: string, overrides: Record<string, string> = {}) {
  const worker = await startWorker({
    config: testConfig(databaseUrl, overrides),
    databaseUrl,
    logger: testLogger('worker'),
  });
  t.teardown(() => worker.stop());
  return worker;
}

/**
 * What a worker hands runAttempt, for a test that runs one attempt of its own
 * task against a real database without a Graphile runner: results are
 * batched by `completions` (drain it to see them written); no cancels.
 */
export function attemptDeps(
  t: Test,
  db: DatabasePool,
  databaseUrl: string,
  logger: Logger,
  observe: TaskDeps['observe'] = () => undefined,
) {
  const plain = new pg.Pool({ connectionString: databaseUrl, max: 2 });
  t.teardown(() => plain.end());
  const completions = new JobCompletions(plain, logger);
  const deps: TaskDeps = {
    db,
    config: testConfig(databaseUrl),
    logger,
    cancels: {
      track: () => ({ signal: new AbortController().signal, untrack: () => true }),
    } as unknown as CancelListener,
    completions,
    deltas: new DeltaPublisher(plain, logger),
    refused: () => undefined,
    observe,
    graphilePool: plain,
  };
  const helpers = { job: { locked_by: null, locked_at: null } } as unknown as JobHelpers;
  return { deps, helpers, completions };
}

export type ProcessOutput = { child: ChildProcess; output: () => string; exited: Promise<number | null> };

/** Runs a process entry (e.g. workers/runner.ts): compiled under `npm test`, else with node --import tsx. */
export function spawnEntry(
  t: Test,
  entry: string,
  env: Record<string, string>,
  options: { args?: string[]; stdin?: string } = {},
): ProcessOutput {
  // Through env -u NODE_OPTIONS: tap puts its process-info hook into every
  // child's NODE_OPTIONS (about 0.6 s of CPU per process, for coverage we
  // do not collect). env execs node in its own place, so the pid and the
  // signals stay the child's.
  const child = spawn(
    '/usr/bin/env',
    ['-u', 'NODE_OPTIONS', process.execPath, ...entryArgs(entry), ...(options.args ?? [])],
    {
      cwd: runRoot,
      env: { PATH: process.env.PATH ?? '', ...env },
      stdio: [options.stdin === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
    },
  );
  if (options.stdin !== undefined) child.stdin!.end(options.stdin);
  let output = '';
  child.stdout!.on('data', (d) => (output += d));
  child.stderr!.on('data', (d) => (output += d));
  // 'exit' can come before the last output is read; `exited` waits for both
  // pipes to end too, unless a process it started holds them open (a
  // postmaster left by a SIGKILL): then not longer than 5 s after the exit.
  const drained = Promise.all([child.stdout!, child.stderr!].map((s) => new Promise((r) => s.once('close', r))));
  const exited = new Promise<number | null>((resolve) =>
    child.once('exit', (code) => {
      const grace = setTimeout(() => resolve(code), 5_000);
      void drained.then(() => {
        clearTimeout(grace);
        resolve(code);
      });
    }),
  );
  t.teardown(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await exited;
    }
  });
  return { child, output: () => output, exited };
}

export function spawnWorkerProcess(
  t: Test,
  databaseUrl: string,
  overrides: Record<string, string> = {},
): ProcessOutput {
  return spawnEntry(t, 'workers/runner.ts', testEnv(databaseUrl, { LOG_LEVEL: 'info', ...overrides }));
}
