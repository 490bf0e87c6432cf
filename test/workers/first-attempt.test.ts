// A first attempt starts without reading its platform job, and with fairness
// off jobs are fetched in batches (workers/worker.ts, serial-batches.ts).
// These tests prove what that could break: a job cancelled (or deleted)
// before its pick never runs, a cancel that lands between the pick and the
// handler stops the handler, and a named queue still runs one job at a time,
// in order, while other jobs are fetched in the same batches.
import pg from 'pg';
import t from 'tap';
import { z } from 'zod';
import { loadMigrations } from '../../core/db/migrate.ts';
import { sql } from '../../core/db/pool.ts';
import { enqueueJobs } from '../../core/jobs/enqueue.ts';
import { completeJob, requestCancel } from '../../core/jobs/lifecycle.ts';
import { CancelListener } from '../../workers/cancellation.ts';
import { startTestServerWithFakeOpenAI } from '../helpers/app.ts';
import { testLogger } from '../helpers/config.ts';
import { createMember, enqueue, withOwnOpenAIKey } from '../helpers/fixtures.ts';
import { waitFor } from '../helpers/wait.ts';
import { startTestWorker } from '../helpers/worker.ts';

const api = await startTestServerWithFakeOpenAI(t, 'sk-lanes-key-1234');
const { app, db, config, openai, databaseUrl, overrides } = api;
const member = await createMember(db, 'admin');

const Count = z.object({ n: z.number() });
/** Graphile jobs (locked or not) that carry this platform job. */
const graphileJobs = (jobId: string) =>
  db.oneFirst(sql.type(Count)`select count(*)::int as n from graphile_worker._private_jobs where payload->>'jobId' = ${jobId}`);
const statusOf = (jobId: string) => db.oneFirst(sql.type(z.object({ status: z.string() }))`select status from jobs where id = ${jobId}`);

t.test('a cancel of a queued job takes its Graphile job out of the queue; a picked one is left to its worker', async (t) => {
  const queued = await enqueue(db, { kind: 'diag.noop', tenantId: member.tenantId });
  t.equal(await graphileJobs(queued), 1);
  t.match(await requestCancel(db, queued), { status: 'cancelled' });
  t.equal(await graphileJobs(queued), 0, 'nobody can pick it up any more');

  const picked = await enqueue(db, { kind: 'diag.noop', tenantId: member.tenantId });
  // As Graphile's pick leaves it: locked by a worker.
  await db.query(sql.unsafe`update graphile_worker._private_jobs set locked_at = now(), locked_by = 'some-worker' where payload->>'jobId' = ${picked}`);
  t.match(await requestCancel(db, picked), { status: 'cancelled' });
  t.equal(await graphileJobs(picked), 1, 'the worker holding it hears of the cancel (job_cancel) and lets it go');
  await db.query(sql.unsafe`delete from graphile_worker._private_jobs where payload->>'jobId' = ${picked}`);
});

t.test('deleting a tenant takes its unfinished jobs out of the queue', async (t) => {
  const other = await createMember(db, 'admin');
  const jobs = await db.transaction((tx) => enqueueJobs(tx, Array.from({ length: 3 }, () => ({ kind: 'diag.noop', tenantId: other.tenantId }))));
  await completeJob(db, jobs[0]!.id, 1, { done: true });
  await db.query(sql.unsafe`delete from tenants where id = ${other.tenantId}`);
  for (const job of jobs.slice(1)) t.equal(await graphileJobs(job.id), 0, 'an unfinished job leaves the queue with its row');
  t.equal(await graphileJobs(jobs[0]!.id), 1, 'a finished job is left to the worker that holds it');
  await db.query(sql.unsafe`delete from graphile_worker._private_jobs where payload->>'jobId' = ${jobs[0]!.id}`);
});

t.test('jobs from before 0028: the migration records their Graphile job, or takes it out of the queue when the row is final or gone', async (t) => {
  const other = await createMember(db, 'admin');
  const jobs = await db.transaction((tx) => enqueueJobs(tx, Array.from({ length: 3 }, () => ({ kind: 'diag.noop', tenantId: other.tenantId }))));
  const ids = sql.array(jobs.map((j) => j.id), 'uuid');
  await db.query(sql.unsafe`update jobs set graphile_job_id = null where id = any(${ids})`); // as enqueued before 0028
  await db.query(sql.unsafe`update jobs set status = 'cancelled' where id = ${jobs[0]!.id}`); // no trigger without the id
  await db.query(sql.unsafe`delete from jobs where id = ${jobs[1]!.id}`);
  t.equal(await graphileJobs(jobs[0]!.id), 1, 'before the backfill the cancelled job is still queued');
  const migration = loadMigrations().find((m) => m.name === '0028_first_attempt_without_read.sql')!;
  const backfill = migration.sql.slice(migration.sql.indexOf('update jobs j set graphile_job_id'), migration.sql.indexOf('create function'));
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  await client.query(backfill).finally(() => client.end());
  t.equal(await graphileJobs(jobs[0]!.id), 0, 'a cancelled job leaves the queue');
  t.equal(await graphileJobs(jobs[1]!.id), 0, 'so does the job of a deleted row');
  t.equal(await graphileJobs(jobs[2]!.id), 1, 'a queued job stays');
  t.equal(
    await db.oneFirst(sql.type(z.object({ n: z.number() }))`
      select count(*)::int as n from jobs j join graphile_worker._private_jobs g on g.id = j.graphile_job_id where j.id = ${jobs[2]!.id}`),
    1, 'and knows its Graphile job, so a later cancel takes it out',
  );
});

t.test('a worker never starts a job cancelled while it was queued', async (t) => {
  const cancelled = await enqueue(db, { kind: 'diag.steps', tenantId: member.tenantId, input: { steps: 1, delayMs: 10 } });
  await requestCancel(db, cancelled);
  const worker = await startTestWorker(t, databaseUrl, { WORKER_CONCURRENCY: '4' });
  const started: string[] = [];
  worker.events.on('job:start', ({ job }) => started.push(String((job.payload as { jobId?: string } | null)?.jobId)));
  const after = await enqueue(db, { kind: 'diag.steps', tenantId: member.tenantId, input: { steps: 1, delayMs: 10 } });
  await waitFor('a later job to finish', async () => (await statusOf(after)) === 'succeeded');
  t.notOk(started.includes(cancelled), 'the cancelled job was never picked up');
  t.equal(await statusOf(cancelled), 'cancelled');
});

t.test('a cancel heard before the handler starts aborts the handler as it starts', async (t) => {
  const listener = new CancelListener(databaseUrl, db, testLogger('job-cancel'));
  await listener.start();
  t.teardown(() => listener.stop());
  const jobId = await enqueue(db, { kind: 'diag.noop', tenantId: member.tenantId });
  await requestCancel(db, jobId); // job_cancel NOTIFY: nobody here tracks the job yet
  const aborted = await waitFor('the cancel to arrive', async () => {
    const tracked = listener.track(jobId);
    if (tracked.signal.aborted) return tracked;
    tracked.untrack();
    return null;
  });
  t.ok(aborted.signal.aborted, 'tracked after the cancel arrived: aborted at once');
  aborted.untrack();
  const fresh = listener.track(jobId);
  t.notOk(fresh.signal.aborted, 'the cancel is used once');
  fresh.untrack();
});

t.test('with fairness off (batched fetches): a session\'s turns run one at a time, in order, among other jobs', async (t) => {
  await withOwnOpenAIKey(db, config, member, 'sk-lanes-key-1234');
  const headers = { authorization: `Bearer ${member.token}`, 'x-tenant-id': member.tenantId };
  const sessionId = (await app.inject({ method: 'POST', url: '/api/chat/sessions', headers, payload: { title: 'Lanes', model: 'openai/gpt-4o-mini' } })).json().id as string;
  // Sent while no worker runs, so every turn waits in the queue together.
  const turns: string[] = [];
  for (let i = 0; i < 5; i++) {
    openai.enqueue({ reply: `answer ${i}`, chunks: 2, delayMs: 30 });
    const res = await app.inject({ method: 'POST', url: '/api/chat/send', headers: { ...headers, 'idempotency-key': `lanes-turn-${i}` }, payload: { sessionId, message: `question ${i}` } });
    t.equal(res.statusCode, 202, res.body);
    turns.push((res.json() as { jobId: string }).jobId);
  }
  const noops = await db.transaction((tx) => enqueueJobs(tx, Array.from({ length: 60 }, () => ({ kind: 'diag.noop', tenantId: member.tenantId }))));

  await startTestWorker(t, databaseUrl, { ...overrides, WORKER_CONCURRENCY: '4' });
  const ids = sql.array([...turns, ...noops.map((j) => j.id)], 'uuid');
  await waitFor('every job to succeed', async () =>
    (await db.oneFirst(sql.type(Count)`select count(*)::int as n from jobs where id = any(${ids}) and status = 'succeeded'`)) === 65, 30_000);
  // started_at is Graphile's lock time, finished_at the result's commit: a
  // queue unlocks only when its job is let go, after its result.
  const spans = await db.any(sql.type(z.object({ id: z.string(), started: z.number(), finished: z.number() }))`
    select id::text, extract(epoch from started_at)::float8 as started, extract(epoch from finished_at)::float8 as finished
    from jobs where id = any(${sql.array(turns, 'uuid')}) order by started_at`);
  t.same(spans.map((s) => s.id), turns, 'the turns started in the order they were sent');
  t.ok(spans.every((s, i) => i === 0 || s.started >= spans[i - 1]!.finished), 'each turn started after the one before it finished');
  const answers = await db.anyFirst(sql.type(z.object({ content: z.string() }))`
    select content from chat_messages where session_id = ${sessionId} and role = 'assistant' order by seq`);
  t.same(answers, [0, 1, 2, 3, 4].map((i) => `answer ${i}`), 'each turn answered in order');
});

t.test('queueSiblings: of the jobs of one queue in a batch, all but the first in Graphile\'s order wait', async (t) => {
  const { queueSiblings } = await import('../../workers/serial-batches.ts');
  const job = (id: string, queue: number | null, priority: number, runAt: string) =>
    ({ id, job_queue_id: queue, priority, run_at: new Date(runAt) }) as unknown as Parameters<typeof queueSiblings>[0][number];
  const batch = [
    job('5', 1, 0, '2026-01-01T00:00:02Z'),
    job('3', 1, 0, '2026-01-01T00:00:01Z'), // first of queue 1: earliest run_at
    job('9', 2, -1, '2026-01-01T00:00:09Z'), // first of queue 2: highest priority
    job('4', 2, 0, '2026-01-01T00:00:00Z'),
    job('7', null, 0, '2026-01-01T00:00:00Z'), // no queue: never held back
    job('6', 1, 0, '2026-01-01T00:00:01Z'), // same run_at as 3: the lower id goes first
  ];
  t.same(queueSiblings(batch).map((j) => j.id), ['5', '4', '6']);
  t.same(queueSiblings([batch[4]!, batch[1]!]), [], 'nothing to hold back');
});
