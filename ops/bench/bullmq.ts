// A peer outside PostgreSQL: BullMQ (npm) on a Redis of our own (Debian's
// redis-server), made as durable as a PostgreSQL commit (append-only file,
// fsync on every write). Enqueue/s from N callers adding one job each, and a
// backlog drained by one worker with the same concurrency as ours, finished
// jobs deleted. It tells what a Redis queue gives for the same no-op job, so
// our figures can be read against the usual alternative to a database queue.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Queue, Worker } from 'bullmq';
import { sleep, throughput, type Throughput } from './measure.ts';
import type { BenchContext } from './scenarios.ts';

const QUEUE = 'bench-noop';

export type BullmqFigures = { enqueue: Throughput; executedPerSecond: number; redisVersion: string };

/** null when Debian's redis-server is not installed (the bench then skips the BullMQ lines and says so). */
export async function bullmqFigures(
  ctx: BenchContext,
  options: { callers: number; concurrency: number; jobs: number },
): Promise<BullmqFigures | null> {
  if (!(options.jobs >= 1)) throw new RangeError('bullmqFigures: jobs must be at least 1');
  const bin = onPath('redis-server');
  if (!bin) return null;
  const { stdout } = await promisify(execFile)(bin, ['--version']);
  const redisVersion = /v=(\S+)/.exec(stdout)?.[1] ?? stdout.trim();

  const dir = await mkdtemp(path.join(os.tmpdir(), 'bench-redis-'));
  let redis: ChildProcess | undefined;
  try {
    const port = await freePort();
    redis = spawn(
      bin,
      [
        '--port',
        String(port),
        '--bind',
        '127.0.0.1',
        '--protected-mode',
        'no',
        '--daemonize',
        'no',
        '--dir',
        dir,
        '--save',
        '',
        '--appendonly',
        'yes',
        '--appendfsync',
        'always',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let output = '';
    const keep = (chunk: Buffer) => (output = (output + chunk.toString()).slice(-4000));
    redis.stdout!.on('data', keep);
    redis.stderr!.on('data', keep);
    await untilPong(redis, port, () => output);
    const connection = { host: '127.0.0.1', port };

    const queue = new Queue(QUEUE, { connection, defaultJobOptions: { removeOnComplete: true } });
    queue.on('error', (error) => ctx.logger.warn({ err: error }, 'bullmq queue error'));
    try {
      const enqueue = await throughput(options.callers, ctx.seconds, async () => {
        await queue.add('noop', { a: 1, b: 'two' });
      });
      await queue.obliterate({ force: true });

      // A backlog of `jobs`, then one worker with `concurrency` drains it.
      for (let i = 0; i < options.jobs; i += 1_000) {
        const n = Math.min(1_000, options.jobs - i);
        await queue.addBulk(Array.from({ length: n }, () => ({ name: 'noop', data: { a: 1 } })));
      }
      let done = 0;
      let finished!: () => void;
      let failed!: (error: Error) => void;
      const allDone = new Promise<void>((resolve, reject) => {
        finished = resolve;
        failed = reject;
      });
      const worker = new Worker(QUEUE, async () => undefined, {
        connection,
        concurrency: options.concurrency,
        autorun: false,
      });
      worker.on('error', (error) => ctx.logger.warn({ err: error }, 'bullmq worker error'));
      worker.on('failed', (_job, error) => failed(error));
      worker.on('completed', () => {
        if (++done === options.jobs) finished();
      });
      try {
        const t0 = performance.now();
        const running = worker.run();
        await Promise.race([
          allDone,
          running.then(() => Promise.reject(new Error('bullmq worker stopped before the backlog was drained'))),
        ]);
        const executedPerSecond = options.jobs / ((performance.now() - t0) / 1000);
        return { enqueue, executedPerSecond, redisVersion };
      } finally {
        await worker.close().catch(() => undefined);
      }
    } finally {
      await queue.close().catch(() => undefined);
    }
  } finally {
    if (redis) await stop(redis);
    await rm(dir, { recursive: true, force: true });
  }
}

function onPath(name: string): string | null {
  for (const d of (process.env.PATH ?? '').split(path.delimiter)) {
    if (!d) continue;
    const file = path.join(d, name);
    try {
      accessSync(file, constants.X_OK);
      return file;
    } catch {
      // not in this directory
    }
  }
  return null;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** Polls with PING until redis answers +PONG; fails if it exits or takes over 10 s. */
async function untilPong(redis: ChildProcess, port: number, output: () => string): Promise<void> {
  const deadline = performance.now() + 10_000;
  while (!(await pong(port))) {
    if (redis.exitCode !== null || redis.signalCode !== null)
      throw new Error(`redis-server exited (${redis.exitCode ?? redis.signalCode}): ${output()}`);
    if (performance.now() > deadline) throw new Error(`redis-server did not answer PING on port ${port}: ${output()}`);
    await sleep(20);
  }
}

function pong(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    let reply = '';
    const end = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1_000, () => end(false));
    socket.on('error', () => end(false));
    socket.on('connect', () => socket.write('PING\r\n'));
    socket.on('data', (chunk) => {
      reply += chunk.toString();
      if (reply.includes('\r\n')) end(reply.startsWith('+PONG'));
    });
  });
}

/** SIGTERM, then SIGKILL if it has not exited within 5 s; resolves once it has exited. */
async function stop(redis: ChildProcess): Promise<void> {
  if (redis.exitCode !== null || redis.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => redis.once('exit', () => resolve()));
  redis.kill('SIGTERM');
  const timer = setTimeout(() => redis.kill('SIGKILL'), 5_000);
  await exited;
  clearTimeout(timer);
}
