// A job release Graphile Worker lost while the database was away: the job
// stays locked by the live worker's pool and would wait four hours. When such
// a loss is reported, the worker starts a fresh Graphile pool and queues what
// the old pool left locked; the job then finishes exactly once.
import t from 'tap';
import { z } from 'zod';
import { sql } from '../../core/db/pool.ts';
import { reportLostDatabaseWork } from '../../core/process/lifecycle.ts';
import { createTestDatabase, testPool } from '../helpers/db.ts';
import { createMember, enqueue } from '../helpers/fixtures.ts';
import { waitFor } from '../helpers/wait.ts';
import { startTestWorker } from '../helpers/worker.ts';

const databaseUrl = await createTestDatabase(t);
const db = await testPool(t, databaseUrl);
const member = await createMember(db);
const Row = z.object({ status: z.string(), attempts: z.number(), result: z.unknown() });
const row = (jobId: string) => db.one(sql.type(Row)`select status, attempts, result from jobs where id = ${jobId}`);

t.test('a job left locked by a lost release is queued again by a fresh Graphile pool and finishes once', async (t) => {
  const worker = await startTestWorker(t, databaseUrl, { WORKER_CONCURRENCY: '2' });
  await waitFor('the worker pool to start', async () => worker.workerIds().length > 0);
  const oldIds = worker.workerIds();
  const poolId = oldIds[0]!;

  // The state a lost release leaves behind: attempt 1 ran on this pool, the
  // platform job still says running, and Graphile's job is locked by the pool
  // although no handler holds it any more.
  const jobId = await enqueue(db, {
    kind: 'diag.steps',
    tenantId: member.tenantId,
    input: { steps: 1, delayMs: 0 },
    runAt: new Date(Date.now() + 60_000),
  });
  await db.query(sql.unsafe`
    update graphile_worker._private_jobs set locked_by = ${poolId}, locked_at = now(), attempts = 1, run_at = now()
    where payload->>'jobId' = ${jobId}`);
  await db.query(
    sql.unsafe`update jobs set status = 'running', attempts = 1, locked_by = ${poolId}, started_at = now() where id = ${jobId}`,
  );
  await new Promise((resolve) => setTimeout(resolve, 500));
  t.equal((await row(jobId)).status, 'running', 'nothing picks a locked job up by itself');

  reportLostDatabaseWork(Object.assign(new Error('Connection terminated unexpectedly'), { code: 'ECONNRESET' }));

  const finished = await waitFor(
    'the job to finish',
    async () => {
      const r = await row(jobId);
      return r.status === 'succeeded' ? r : null;
    },
    20_000,
  );
  t.equal(finished.attempts, 2, 'the second attempt finished it');
  t.same(finished.result, { steps: 1, attempt: 2 }, 'one result');
  t.notSame(worker.workerIds(), oldIds, 'the worker runs on a new Graphile pool');
  const locked = await db.oneFirst(sql.type(z.object({ n: z.number() }))`
    select count(*)::int as n from graphile_worker._private_jobs where locked_by = any(${sql.array(oldIds, 'text')})`);
  t.equal(locked, 0, 'the old pool holds nothing');

  // The fresh pool keeps working.
  const next = await enqueue(db, { kind: 'diag.steps', tenantId: member.tenantId, input: { steps: 1, delayMs: 0 } });
  await waitFor('a new job to succeed', async () => (await row(next)).status === 'succeeded');
});

t.test(
  'Graphile giving up on recording finished jobs (its pool:fatalError) restarts the pools, and the job left locked finishes once',
  async (t) => {
    const worker = await startTestWorker(t, databaseUrl, { WORKER_CONCURRENCY: '2' });
    await waitFor('the worker pool to start', async () => worker.workerIds().length > 0);
    const oldIds = worker.workerIds();
    const jobId = await enqueue(db, {
      kind: 'diag.steps',
      tenantId: member.tenantId,
      input: { steps: 1, delayMs: 0 },
      runAt: new Date(Date.now() + 60_000),
    });
    await db.query(sql.unsafe`
    update graphile_worker._private_jobs set locked_by = ${oldIds[0]!}, locked_at = now(), attempts = 1, run_at = now()
    where payload->>'jobId' = ${jobId}`);
    await db.query(
      sql.unsafe`update jobs set status = 'running', attempts = 1, locked_by = ${oldIds[0]!}, started_at = now() where id = ${jobId}`,
    );

    // What Graphile emits after its completion batch failed for good.
    worker.events.emit(
      'pool:fatalError' as never,
      {
        error: Object.assign(new Error('Connection terminated unexpectedly'), { code: 'ECONNRESET' }),
        action: 'completeJob',
        workerPool: { id: oldIds[0]! },
      } as never,
    );

    const finished = await waitFor(
      'the job to finish',
      async () => {
        const r = await row(jobId);
        return r.status === 'succeeded' ? r : null;
      },
      20_000,
    );
    t.equal(finished.attempts, 2, 'the second attempt finished it');
    t.notSame(worker.workerIds(), oldIds, 'the worker runs on new Graphile pools');
  },
);
