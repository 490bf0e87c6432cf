// Scheduled tasks record their runs; the hourly sweep removes expired rows.
import t from 'tap';
import { z } from 'zod';
import { sql } from '../../core/db/pool.ts';
import { CRON_ITEMS } from '../../schedules/index.ts';
import { TASKS } from '../../workers/tasks/index.ts';
import { createTestDatabase, testPool } from '../helpers/db.ts';
import { createMember, enqueue } from '../helpers/fixtures.ts';
import { waitFor } from '../helpers/wait.ts';
import { startTestWorker } from '../helpers/worker.ts';

const databaseUrl = await createTestDatabase(t);
const db = await testPool(t, databaseUrl);
const member = await createMember(db);

t.test('every cron item names a task the worker has', async (t) => {
  const kinds = new Set(TASKS.map((task) => task.kind));
  for (const item of CRON_ITEMS) t.ok(kinds.has(item.task), `${item.identifier} -> ${item.task}`);
  t.equal(new Set(CRON_ITEMS.map((i) => i.identifier)).size, CRON_ITEMS.length, 'identifiers are unique');
});

t.test('the expired-rows sweep deletes old finished jobs and records its run', async (t) => {
  const old = await enqueue(db, { kind: 'diag.noop', tenantId: member.tenantId });
  const recent = await enqueue(db, { kind: 'diag.noop', tenantId: member.tenantId });
  await db.query(sql.unsafe`
    update jobs set status = 'succeeded', finished_at = now() - interval '400 days' where id = ${old}`);
  await db.query(sql.unsafe`update jobs set status = 'succeeded', finished_at = now() where id = ${recent}`);

  // A named queue whose last job is gone: its row stays until the sweep.
  await db.query(
    sql.unsafe`select graphile_worker.complete_jobs(array[(graphile_worker.add_job('diag.noop', '{}'::json, queue_name => 'queue-left-idle')).id])`,
  );
  const idleQueue = () =>
    db.oneFirst(sql.type(z.object({ n: z.number() }))`
    select count(*)::int as n from graphile_worker._private_job_queues where queue_name = 'queue-left-idle'`);
  t.equal(await idleQueue(), 1);

  const worker = await startTestWorker(t, databaseUrl);
  await worker.runner.addJob('maintenance.sweep_expired', {});
  const Run = z.object({ status: z.string(), detail: z.unknown(), finished_at: z.string().nullable() });
  const run = await waitFor('the sweep run to be recorded', () =>
    db.maybeOne(
      sql.type(
        Run,
      )`select status, detail, finished_at from scheduled_job_runs where task = 'maintenance.sweep_expired'`,
    ),
  );
  t.equal(run.status, 'succeeded');
  t.ok(run.finished_at);
  t.match(run.detail, { removed: { 'finished jobs past retention': 1 } });
  const left = await db.anyFirst(
    sql.type(z.object({ id: z.string() }))`select id from jobs where id in (${old}, ${recent})`,
  );
  t.same(left, [recent], 'the recent job stays');
  t.match(
    run.detail,
    { graphileCleanup: ['GC_JOB_QUEUES', 'DELETE_PERMAFAILED_JOBS'] },
    "Graphile Worker's own cleanup ran",
  );
  t.equal(await idleQueue(), 0, "Graphile Worker's idle queue row is collected");
});

t.test('a job fails permanently with its code, or is retried after a transient error', async (t) => {
  await startTestWorker(t, databaseUrl);
  const permanent = await enqueue(db, {
    kind: 'diag.steps',
    tenantId: member.tenantId,
    input: { failPermanently: true },
  });
  const badInput = await enqueue(db, { kind: 'diag.steps', tenantId: member.tenantId, input: { steps: 'many' } });
  const flaky = await enqueue(db, {
    kind: 'diag.steps',
    tenantId: member.tenantId,
    input: { steps: 1, delayMs: 0, failAttemptsBelow: 2 },
    maxAttempts: 3,
  });
  const Row = z.object({ status: z.string(), attempts: z.number(), error: z.unknown(), result: z.unknown() });
  const final = (id: string) =>
    waitFor(`job ${id} to finish`, async () => {
      const row = await db.one(sql.type(Row)`select status, attempts, error, result from jobs where id = ${id}`);
      return ['succeeded', 'failed'].includes(row.status) ? row : null;
    });
  t.match(await final(permanent), { status: 'failed', attempts: 1, error: { code: 'diag_failed', retrying: false } });
  t.match(await final(badInput), { status: 'failed', error: { code: 'invalid_input', message: /steps/ } });
  // Graphile Worker's backoff before attempt 2 is about 2.7 s.
  t.match(await final(flaky), { status: 'succeeded', attempts: 2, result: { attempt: 2 }, error: null });
});
