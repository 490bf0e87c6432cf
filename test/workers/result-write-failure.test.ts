// A result PostgreSQL refuses for a reason other than an outage (a trigger,
// a constraint) while the worker lives on: the job ends failed, or is retried
// and succeeds once the refusal is gone; it never stays running, so its serial
// queue goes on. Results batched with it are recorded, and when even the
// failure cannot be written the job is queued again with a wake-up. The
// refusal is real: a trigger on jobs raises for the job ids the test lists.
import { Writable } from 'node:stream';
import pino from 'pino';
import t from 'tap';
import { z } from 'zod';
import { sql } from '../../core/db/pool.ts';
import { enqueueJob, type JobSpec } from '../../core/jobs/enqueue.ts';
import { runAttempt } from '../../workers/attempt.ts';
import type { PlatformTask } from '../../workers/define-task.ts';
import { createTestDatabase, testPool } from '../helpers/db.ts';
import { createMember, enqueue } from '../helpers/fixtures.ts';
import { waitFor } from '../helpers/wait.ts';
import { attemptDeps, startTestWorker } from '../helpers/worker.ts';

const databaseUrl = await createTestDatabase(t);
const db = await testPool(t, databaseUrl);
const member = await createMember(db);

// Updates of a listed job to one of its listed statuses raise its SQLSTATE.
await db.query(sql.unsafe`
  create table test_refused_writes (job_id uuid primary key, statuses text[] not null, errcode text not null)`);
await db.query(sql.unsafe`
  create function test_refuse_write() returns trigger language plpgsql as $$
  declare r record;
  begin
    select * into r from test_refused_writes where job_id = new.id and new.status = any(statuses);
    if found then
      raise exception 'the test refuses this write (%)', new.status using errcode = r.errcode;
    end if;
    return new;
  end $$`);
await db.query(sql.unsafe`
  create trigger test_refuse_write before update on jobs for each row execute function test_refuse_write()`);
/** Adds a job whose writes of these statuses are refused from the start. */
const enqueueRefused = (spec: JobSpec, statuses: string[], errcode = '23514') =>
  db.transaction(async (tx) => {
    const { id } = await enqueueJob(tx, spec);
    await tx.query(sql.unsafe`
      insert into test_refused_writes values (${id}, ${sql.array(statuses, 'text')}, ${errcode})`);
    return id;
  });
await startTestWorker(t, databaseUrl);
const allow = (jobId: string) => db.query(sql.unsafe`delete from test_refused_writes where job_id = ${jobId}`);

const Row = z.object({ status: z.string(), attempts: z.number(), error: z.any(), result: z.unknown() });
const row = (jobId: string) =>
  db.one(sql.type(Row)`select status, attempts, error, result from jobs where id = ${jobId}`);
const reaches = (jobId: string, what: string, check: (r: z.infer<typeof Row>) => boolean) =>
  waitFor(`job ${jobId} ${what}`, async () => {
    const r = await row(jobId);
    return check(r) ? r : null;
  });
const final = (jobId: string) =>
  reaches(jobId, 'to end', (r) => ['succeeded', 'failed', 'cancelled'].includes(r.status));

// Far in the future: only the test's own attempts run these.
const later = () => new Date(Date.now() + 3_600_000);

t.test('a refused result fails its job; the serial queue behind it goes on', async (t) => {
  const queue = 'session:refused-final';
  const head = await enqueueRefused(
    { kind: 'diag.noop', tenantId: member.tenantId, queueName: queue, maxAttempts: 1 },
    ['succeeded'],
  );
  const next = await enqueue(db, { kind: 'diag.noop', tenantId: member.tenantId, queueName: queue });

  t.match(await final(next), { status: 'succeeded' }, 'the next job of the queue ran');
  t.match(
    await row(head),
    { status: 'failed', attempts: 1, result: null, error: { code: 'result_not_recorded', retrying: false } },
    'the refused job ended failed, not running',
  );
  t.match((await row(head)).error.message, /SQLSTATE 23514/);

  // The worker lives on: another queue's job, and a retried one that succeeds once the refusal is gone.
  const retried = await enqueueRefused(
    { kind: 'diag.noop', tenantId: member.tenantId, queueName: 'session:retried' },
    ['succeeded'],
    'P0001',
  );
  const behind = await enqueue(db, { kind: 'diag.noop', tenantId: member.tenantId, queueName: 'session:retried' });
  t.match(await reaches(retried, 'to wait for its retry', (r) => r.error?.retrying === true), {
    status: 'queued',
    attempts: 1,
    error: { code: 'result_not_recorded', message: /SQLSTATE P0001/ },
  });
  await allow(retried);
  t.match(await final(retried), { status: 'succeeded', attempts: 2, result: { ok: true }, error: null });
  t.match(await final(behind), { status: 'succeeded', attempts: 1 }, 'the job behind it ran after it');
});

// One attempt of each job through the worker's own runAttempt, results batched by one JobCompletions.
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
const { deps, helpers, completions } = attemptDeps(t, db, databaseUrl, logger);
const task: PlatformTask = { kind: 'diag.noop', input: z.unknown(), run: async (_input, ctx) => ({ by: ctx.jobId }) };
const attemptAll = async (jobIds: string[], maxAttempts = 1) => {
  await Promise.all(
    jobIds.map((jobId) =>
      runAttempt(
        task,
        { jobId, tenantId: member.tenantId, kind: task.kind, input: {}, attempt: 1, maxAttempts },
        deps,
        helpers,
      ),
    ),
  );
  await completions.drain();
};

t.test('the other results of a batch with a refused one are recorded', async (t) => {
  const spec = () => ({ kind: 'diag.noop', tenantId: member.tenantId, runAt: later() });
  const jobs = [await enqueue(db, spec()), await enqueue(db, spec()), await enqueueRefused(spec(), ['succeeded'])];
  jobs.push(await enqueue(db, spec()));
  lines.length = 0;
  await attemptAll(jobs);
  t.ok(
    lines.some((l) => /batched job completion failed/.test(l)),
    'the refused result was in a batch with others',
  );
  for (const jobId of jobs.filter((_, i) => i !== 2))
    t.match(await row(jobId), { status: 'succeeded', result: { by: jobId } }, 'a result batched with it is recorded');
  t.match(await row(jobs[2]!), { status: 'failed', error: { code: 'result_not_recorded' } });
});

t.test('when even the failure cannot be written, the job is queued again with a wake-up', async (t) => {
  const jobId = await enqueueRefused({ kind: 'diag.noop', tenantId: member.tenantId, runAt: later() }, [
    'succeeded',
    'failed',
  ]);
  await attemptAll([jobId], 2); // at its last attempt it would fail instead (nothing left to hand it to)
  t.match(await row(jobId), {
    status: 'queued',
    attempts: 1,
    error: { code: 'result_not_recorded', retrying: true },
  });
  const wakeUp = await db.maybeOne(sql.type(z.object({ soon: z.boolean() }))`
    select run_at < now() + interval '30 minutes' as soon from graphile_worker.jobs
    where key = ${`j:${jobId}`} and locked_at is null`);
  t.same(wakeUp, { soon: true }, 'it has a wake-up of its own, at its retry time');
  await allow(jobId);
  t.match(await final(jobId), { status: 'succeeded', attempts: 2 }, 'the worker runs it again');
});
