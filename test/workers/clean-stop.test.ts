// A worker stops once and cleanly while both pools are busy: jobs running in
// the short and the I/O pool, and each pool's local queue holding wake-ups it
// fetched for slots that are all taken. Graphile Worker 0.18 cannot release a
// local queue in that state (its jobs' return is started after the release:
// "Cannot background something when the queue is already released"), then
// stops the pool by force. The worker must stop each runner once, write no
// warning or error, and give the held wake-ups back as they were (their
// attempt not spent), so they run later as first attempts.
import type { EventEmitter } from 'node:events';
import pino from 'pino';
import t from 'tap';
import { z } from 'zod';
import { sql } from '../../core/db/pool.ts';
import { enqueueJobs } from '../../core/jobs/enqueue.ts';
import { poolOf } from '../../core/jobs/pools.ts';
import { startWorker } from '../../workers/worker.ts';
import { testConfig } from '../helpers/config.ts';
import { createTestDatabase, testPool } from '../helpers/db.ts';
import { createMember } from '../helpers/fixtures.ts';
import { captureLog } from '../helpers/log-capture.ts';
import { waitFor } from '../helpers/wait.ts';
import { startTestWorker } from '../helpers/worker.ts';

const databaseUrl = await createTestDatabase(t);
const db = await testPool(t, databaseUrl);
const member = await createMember(db);

/** What the test reads of Graphile's local queue (the `localQueue:setMode` event's). */
type LocalQueue = { mode: string; fetchInProgress: boolean; jobQueue: readonly { task_identifier: string }[] };
type SetMode = { localQueue: LocalQueue; oldMode: string; newMode: string };

/** Jobs long enough to still run when the worker is told to stop (a stop lets them finish). */
const JOB_MS = 2_500;

t.test('a worker with jobs running and wake-ups held in both pools stops once, with no warning', async (t) => {
  const log = captureLog();
  const worker = await startWorker({
    // One short slot fetching 3 at a time, two I/O slots fetching 1 at a time.
    config: testConfig(databaseUrl, {
      WORKER_CONCURRENCY: '1',
      WORKER_FETCH_BATCH: '3',
      WORKER_IO_CONCURRENCY: '2',
      WORKER_IO_FETCH_BATCH: '1',
      SHUTDOWN_TIMEOUT_MS: '30000',
    }),
    databaseUrl,
    logger: pino({ level: 'warn' }, log.stream),
  });
  let stopped = false;
  t.teardown(() => (stopped ? undefined : worker.stop()));
  const events = worker.events as unknown as EventEmitter;
  const queues = new Set<LocalQueue>();
  /** How each local queue was released: from which mode, and whether a fetch was in flight. */
  const releases: string[] = [];
  events.on('localQueue:setMode', ({ localQueue, oldMode, newMode }: SetMode) => {
    queues.add(localQueue);
    if (newMode === 'RELEASED') releases.push(`${oldMode}${localQueue.fetchInProgress ? ', fetching' : ''}`);
  });
  const shutdowns: { graceful: string[]; forceful: string[] } = { graceful: [], forceful: [] };
  events.on('pool:gracefulShutdown', ({ workerPool }: { workerPool: { id: string } }) =>
    shutdowns.graceful.push(workerPool.id),
  );
  events.on('pool:forcefulShutdown', ({ workerPool }: { workerPool: { id: string } }) =>
    shutdowns.forceful.push(workerPool.id),
  );
  const poolIds = worker.workerIds();

  const jobs = await db.transaction((tx) =>
    enqueueJobs(tx, [
      ...Array.from({ length: 6 }, () => ({
        kind: 'diag.steps',
        tenantId: member.tenantId,
        input: { steps: 1, delayMs: JOB_MS },
      })),
      ...Array.from({ length: 6 }, () => ({ kind: 'diag.wait', tenantId: member.tenantId, input: { ms: JOB_MS } })),
    ]),
  );
  const ids = jobs.map((j) => j.id);

  // Each pool's local queue holds wake-ups its busy slots cannot take yet.
  const holding = (pool: string) =>
    [...queues].find((q) => q.mode === 'WAITING' && q.jobQueue.some((j) => poolOf(j.task_identifier) === pool));
  await waitFor(
    'both pools busy, each holding fetched wake-ups',
    async () => holding('short') && holding('io') && worker.load().short === 1 && worker.load().io === 2,
  );
  const held = (holding('short')?.jobQueue.length ?? 0) + (holding('io')?.jobQueue.length ?? 0);
  t.ok(held >= 2, `the local queues hold ${held} wake-ups as the stop begins`);

  await Promise.all([worker.stop(), worker.stop()]);
  stopped = true;

  t.equal(log.text(), '', 'no warning or error was logged');
  t.same([...shutdowns.graceful].sort(), [...poolIds].sort(), "each pool's runner was stopped once");
  t.same(shutdowns.forceful, [], 'no pool was stopped by force');
  // The held wake-ups were taken off first: each queue, emptied, was fetching when released.
  t.same(releases, ['POLLING, fetching', 'POLLING, fetching'], 'each local queue was released once, while fetching');

  // The held wake-ups are back in the queue, unlocked, their attempt not spent.
  const Wakeup = z.object({ locked_by: z.string().nullable(), attempts: z.number() });
  const left = await db.any(sql.type(Wakeup)`
    select locked_by, attempts from graphile_worker.jobs
    where task_identifier in ('diag.steps', 'diag.wait')`);
  t.ok(left.length >= held, 'the held wake-ups are still queued');
  t.same(
    left.filter((w) => w.locked_by !== null || w.attempts !== 0),
    [],
    'none locked, none with an attempt spent',
  );

  // A new worker runs every job, each in one attempt.
  await startTestWorker(t, databaseUrl, { WORKER_CONCURRENCY: '8', WORKER_IO_CONCURRENCY: '8' });
  const Row = z.object({ status: z.string(), attempts: z.number() });
  const rows = await waitFor(
    'every job to succeed',
    async () => {
      const r = await db.any(
        sql.type(Row)`select status, attempts from jobs where id = any(${sql.array(ids, 'uuid')})`,
      );
      return r.every((x) => x.status === 'succeeded') && r;
    },
    60_000,
  );
  t.same(
    rows.map((r) => r.attempts),
    ids.map(() => 1),
    'each job ran once',
  );
});
