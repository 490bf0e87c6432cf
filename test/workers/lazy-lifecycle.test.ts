// The worker's cheap path (core/jobs/lifecycle.ts, core/jobs/completions.ts):
// 'running' written only for work that lasts, results of many jobs written
// by one statement, and the fencing that keeps one result per job when
// attempts overlap. The SIGKILL and retry paths run in dead-worker.test.ts
// and cancel.test.ts; these tests prove what the new paths could break.
import { Writable } from 'node:stream';
import pg from 'pg';
import pino from 'pino';
import t from 'tap';
import { z } from 'zod';
import { StatementBatcher } from '../../core/db/batcher.ts';
import { sql } from '../../core/db/pool.ts';
import { enqueueJobs } from '../../core/jobs/enqueue.ts';
import {
  completeJob,
  completeJobs,
  markRunning,
  reportProgress,
  requestCancel,
  waitJob,
} from '../../core/jobs/lifecycle.ts';
import { startWorker } from '../../workers/worker.ts';
import { testConfig, testLogger } from '../helpers/config.ts';
import { createTestDatabase, testPool } from '../helpers/db.ts';
import { createMember, enqueue } from '../helpers/fixtures.ts';
import { waitFor } from '../helpers/wait.ts';
import { spawnWorkerProcess } from '../helpers/worker.ts';

const databaseUrl = await createTestDatabase(t);
const db = await testPool(t, databaseUrl);
const member = await createMember(db);
const holder = { lockedBy: 'test-worker', lockedAt: null };
// The worker's batched statements run on plain node-postgres.
const raw = new pg.Pool({ connectionString: databaseUrl, max: 2 });
t.teardown(() => raw.end());

const Row = z.object({
  status: z.string(),
  attempts: z.number(),
  version: z.number(),
  result: z.unknown(),
  error: z.unknown(),
  started_at: z.unknown(),
});
const row = (jobId: string) =>
  db.one(sql.type(Row)`select status, attempts, version, result, error, started_at from jobs where id = ${jobId}`);
const noop = () => enqueue(db, { kind: 'test.idle', tenantId: member.tenantId });

t.test('fencing: an attempt writes only while no later attempt has written and the job is not final', async (t) => {
  // Two attempts that never wrote: the first to finish wins, the other is refused.
  const a = await noop();
  t.ok(await completeJob(db, a, 2, { by: 2 }, holder), 'attempt 2 records its result');
  t.notOk(await completeJob(db, a, 1, { by: 1 }, holder), 'attempt 1, finishing later, is refused');
  t.notOk(await markRunning(db, a, 3, holder), 'nothing resurrects a finished job');
  t.match(await row(a), { status: 'succeeded', attempts: 2, result: { by: 2 } });

  // An attempt that wrote 'running' fences out the older one.
  const b = await noop();
  t.ok(await reportProgress(raw, b, 2, { step: 1 }, holder), 'the first progress marks attempt 2 running');
  t.match(await row(b), { status: 'running', attempts: 2 });
  t.notOk(await completeJob(db, b, 1, { by: 1 }, holder), 'a lost attempt 1 cannot write over attempt 2');
  t.notOk(await reportProgress(raw, b, 1, { step: 9 }, holder), 'nor report progress');
  t.ok(await completeJob(db, b, 2, { by: 2 }, holder));

  // A failed attempt leaves 'queued' with its number: it cannot write again, the next one can.
  const c = await noop();
  await waitJob(db, {
    jobId: c,
    attempt: 1,
    keepAttempt: false,
    until: new Date(),
    error: { code: 'x', message: 'transient', retrying: true },
    holder,
  });
  t.match(await row(c), { status: 'queued', attempts: 1, error: { retrying: true } });
  t.notOk(await completeJob(db, c, 1, { late: true }, holder), 'the failed attempt cannot record a result later');
  t.ok(await completeJob(db, c, 2, { by: 2 }, holder), 'the retry can');

  // A job cancelled while queued refuses an attempt that was running lazily.
  const d = await noop();
  t.match(await requestCancel(db, d), { status: 'cancelled' });
  t.notOk(await completeJob(db, d, 1, { by: 1 }, holder));
  t.match(await row(d), { status: 'cancelled', result: null });
});

t.test('completeJobs: one statement for many jobs, each guarded on its own', async (t) => {
  const ids = await Promise.all(Array.from({ length: 5 }, noop));
  await completeJob(db, ids[1]!, 1, { earlier: true }, holder); // already final
  await markRunning(db, ids[2]!, 3, holder); // a later attempt holds it
  const recorded = await completeJobs(
    raw,
    ids.map((jobId, i) => ({ jobId, attempt: 1, result: { i }, holder })),
  );
  t.same([...recorded].sort(), [ids[0], ids[3], ids[4]].sort(), 'recorded exactly the jobs this attempt may finish');
  t.match(await row(ids[1]!), { result: { earlier: true } });
  t.match(await row(ids[2]!), { status: 'running', attempts: 3 });
  t.match(await row(ids[4]!), { status: 'succeeded', result: { i: 4 } });
});

t.test(
  'a batch that fails halfway is written again item by item: only the bad result fails, the rest once',
  async (t) => {
    const ids = await Promise.all(Array.from({ length: 6 }, noop));
    const lines: string[] = [];
    const logger = pino(
      { level: 'warn' },
      new Writable({
        write: (chunk, _e, done) => {
          lines.push(String(chunk));
          done();
        },
      }),
    );
    let statements = 0;
    const batcher = new StatementBatcher(
      async (items: ReadonlyArray<{ jobId: string; result: unknown }>) => {
        statements++;
        const recorded = await completeJobs(
          raw,
          items.map((c) => ({ ...c, attempt: 1, holder })),
        );
        return items.map((c) => ({ ok: true as const, value: recorded.has(c.jobId) }));
      },
      { key: (c) => c.jobId, what: 'job completion', logger, maxInFlight: 1 },
    );
    // PostgreSQL's jsonb refuses \u0000: the batch holding it fails as a whole.
    const outcomes = await Promise.allSettled(
      ids.map((jobId, i) => batcher.submit({ jobId, result: i === 3 ? { text: 'nul \u0000 here' } : { i } })),
    );
    t.equal(outcomes[3]!.status, 'rejected', 'the bad result fails');
    t.same(
      outcomes.filter((o) => o.status === 'fulfilled').map((o) => (o as PromiseFulfilledResult<boolean>).value),
      [true, true, true, true, true],
    );
    t.ok(statements >= 7, `the failed batch was retried one by one (${statements} statements)`);
    t.ok(
      lines.some((l) => l.includes('batched job completion failed')),
      'and the retry is logged',
    );
    for (const [i, id] of ids.entries()) {
      const r = await row(id);
      if (i === 3) t.match(r, { status: 'queued', result: null }, 'nothing recorded for the bad one');
      else t.match(r, { status: 'succeeded', result: { i }, version: 2 }, 'one write for each good one');
    }
    // The same job twice in a row: never in one statement, the second is refused.
    const again = await noop();
    const [first, second] = await Promise.all([
      batcher.submit({ jobId: again, result: 1 }),
      batcher.submit({ jobId: again, result: 2 }),
    ]);
    t.same([first, second], [true, false], 'first wins, the duplicate is refused');
  },
);

t.test('a worker: quick jobs go from queued to their result in one write; long ones show running', async (t) => {
  const worker = await startWorker({
    config: testConfig(databaseUrl, { WORKER_CONCURRENCY: '8', WORKER_RUNNING_AFTER_MS: '600000' }),
    databaseUrl,
    logger: testLogger('worker'),
  });
  t.teardown(() => worker.stop());
  const jobs = await db.transaction((tx) =>
    enqueueJobs(
      tx,
      Array.from({ length: 120 }, () => ({ kind: 'diag.noop', tenantId: member.tenantId, input: { a: 1 } })),
    ),
  );
  const ids = jobs.map((j) => j.id);
  await waitFor(
    '120 results',
    async () =>
      (await db.oneFirst(
        sql.type(
          z.object({ n: z.number() }),
        )`select count(*)::int as n from jobs where id = any(${sql.array(ids, 'uuid')}) and status = 'succeeded'`,
      )) === 120,
  );
  const versions = await db.anyFirst(
    sql.type(z.object({ version: z.number() }))`select version from jobs where id = any(${sql.array(ids, 'uuid')})`,
  );
  t.same([...new Set(versions)], [2], 'every job: one write after its insert (no running write)');
  const started = await db.oneFirst(
    sql.type(
      z.object({ n: z.number() }),
    )`select count(*)::int as n from jobs where id = any(${sql.array(ids, 'uuid')}) and started_at is not null and attempts = 1`,
  );
  t.equal(started, 120, 'the result write records the attempt and its start');
  await waitFor(
    'Graphile to let the jobs go',
    async () =>
      (await db.oneFirst(
        sql.type(
          z.object({ n: z.number() }),
        )`select count(*)::int as n from graphile_worker.jobs where task_identifier = 'diag.noop'`,
      )) === 0,
  );

  // Progress marks a job running at once, before it finishes.
  const slow = await enqueue(db, { kind: 'diag.steps', tenantId: member.tenantId, input: { steps: 2, delayMs: 300 } });
  await waitFor('the first progress to mark it running', async () => (await row(slow)).status === 'running');
  await waitFor('the result', async () => (await row(slow)).status === 'succeeded');
});

t.test('a job cancelled while it runs lazily (still queued in our table) is aborted at once', async (t) => {
  const worker = await startWorker({
    config: testConfig(databaseUrl, { WORKER_RUNNING_AFTER_MS: '600000', JOB_CANCEL_GRACE_MS: '1000' }),
    databaseUrl,
    logger: testLogger('worker'),
  });
  t.teardown(() => worker.stop());
  const startedIds = new Set<string>();
  worker.events.on('job:start', ({ job }) => startedIds.add(String((job.payload as { jobId?: string } | null)?.jobId)));
  const jobId = await enqueue(db, {
    kind: 'diag.steps',
    tenantId: member.tenantId,
    input: { steps: 1, delayMs: 60_000 },
  });
  await waitFor('the attempt to start', async () => startedIds.has(jobId));
  t.equal((await row(jobId)).status, 'queued', 'no running write yet');
  t.match(await requestCancel(db, jobId), { status: 'cancelled' });
  await waitFor(
    'the worker to let the job go',
    async () =>
      (await db.oneFirst(
        sql.type(
          z.object({ n: z.number() }),
        )`select count(*)::int as n from graphile_worker._private_jobs where payload->>'jobId' = ${jobId}`,
      )) === 0,
    10_000,
  );
  t.match(await row(jobId), { status: 'cancelled', result: null, error: null });
});

t.test('a worker process SIGKILLed amid a stream of quick jobs: every job ends with one result', async (t) => {
  const doomed = spawnWorkerProcess(t, databaseUrl, { WORKER_CONCURRENCY: '8' });
  const jobs = await db.transaction((tx) =>
    enqueueJobs(
      tx,
      Array.from({ length: 1500 }, () => ({ kind: 'diag.noop', tenantId: member.tenantId })),
    ),
  );
  const ids = sql.array(
    jobs.map((j) => j.id),
    'uuid',
  );
  const count = (where: ReturnType<typeof sql.fragment>) =>
    db.oneFirst(
      sql.type(z.object({ n: z.number() }))`select count(*)::int as n from jobs where id = any(${ids}) and ${where}`,
    );
  await waitFor(
    'some results from the doomed worker',
    async () => (await count(sql.fragment`status = 'succeeded'`)) >= 20,
  );
  doomed.child.kill('SIGKILL');
  await doomed.exited;
  const atKill = await count(sql.fragment`status = 'succeeded'`);
  t.ok(atKill < 1500, `killed with ${1500 - atKill} jobs left`);
  const worker = await startWorker({ config: testConfig(databaseUrl), databaseUrl, logger: testLogger('worker') });
  t.teardown(() => worker.stop());
  await waitFor('every job to succeed', async () => (await count(sql.fragment`status = 'succeeded'`)) === 1500, 60_000);
  t.equal(
    await count(sql.fragment`result = '{"ok": true}'::jsonb and finished_at is not null`),
    1500,
    'each with its result',
  );
  t.equal(await count(sql.fragment`status <> 'succeeded'`), 0, 'none failed, none stuck');
  await waitFor(
    'Graphile to let every job go',
    async () =>
      (await db.oneFirst(
        sql.type(
          z.object({ n: z.number() }),
        )`select count(*)::int as n from graphile_worker.jobs where task_identifier = 'diag.noop'`,
      )) === 0,
    30_000,
  );
});
