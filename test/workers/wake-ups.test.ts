// A Graphile job is a wake-up: it names a platform job (or a serial queue)
// and runs it only if one read finds it open and due (docs/engine.md). These
// tests prove what a wake-up must never do: run a job cancelled (or deleted)
// before its pick, run on after a cancel that lands between its pick and the
// handler, run a job twice when it comes twice, or let a serial queue run two
// jobs at once while wake-ups are fetched in batches.
import t from 'tap';
import { z } from 'zod';
import { sql } from '../../core/db/pool.ts';
import { enqueueJobs, enqueueSystemJob } from '../../core/jobs/enqueue.ts';
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
/** Graphile jobs (locked or not) that wake this platform job: its own, or one keyed by its id. */
const graphileJobs = (jobId: string) =>
  db.oneFirst(sql.type(Count)`
  select count(*)::int as n from graphile_worker.jobs g
  where g.id = (select graphile_job_id from jobs where id = ${jobId}) or g.key = ${`j:${jobId}`}`);
const statusOf = (jobId: string) =>
  db.oneFirst(sql.type(z.object({ status: z.string() }))`select status from jobs where id = ${jobId}`);

t.test(
  'a cancel of a queued job takes its Graphile job out of the queue; a picked one is left to its worker',
  async (t) => {
    const queued = await enqueue(db, { kind: 'diag.noop', tenantId: member.tenantId });
    t.equal(await graphileJobs(queued), 1);
    t.match(await requestCancel(db, queued), { status: 'cancelled' });
    t.equal(await graphileJobs(queued), 0, 'nobody can pick it up any more');

    const picked = await enqueue(db, { kind: 'diag.noop', tenantId: member.tenantId });
    // As Graphile's pick leaves it: locked by a worker (the test writes Graphile's table to get there).
    const ofPicked = sql.fragment`id = (select graphile_job_id from jobs where id = ${picked})`;
    await db.query(
      sql.unsafe`update graphile_worker._private_jobs set locked_at = now(), locked_by = 'some-worker' where ${ofPicked}`,
    );
    t.match(await requestCancel(db, picked), { status: 'cancelled' });
    t.equal(await graphileJobs(picked), 1, 'the worker holding it hears of the cancel (job_cancel) and lets it go');
    await db.query(sql.unsafe`delete from graphile_worker._private_jobs where ${ofPicked}`);
  },
);

t.test('deleting a tenant takes its unfinished jobs out of the queue', async (t) => {
  const other = await createMember(db, 'admin');
  const jobs = await db.transaction((tx) =>
    enqueueJobs(
      tx,
      Array.from({ length: 3 }, () => ({ kind: 'diag.noop', tenantId: other.tenantId })),
    ),
  );
  const wakeUps = await db.anyFirst(sql.type(z.object({ id: z.string() }))`
    select graphile_job_id::text as id from jobs where id = any(${sql.array(
      jobs.map((j) => j.id),
      'uuid',
    )}) order by created_at, id`);
  const left = async (ids: readonly string[]) =>
    db.oneFirst(sql.type(Count)`
    select count(*)::int as n from graphile_worker.jobs where id = any(${sql.array([...ids], 'int8')})`);
  await completeJob(db, jobs[0]!.id, 1, { done: true });
  const finishedWakeUp = await db.oneFirst(
    sql.type(z.object({ id: z.string() }))`select graphile_job_id::text as id from jobs where id = ${jobs[0]!.id}`,
  );
  await db.query(sql.unsafe`delete from tenants where id = ${other.tenantId}`);
  t.equal(
    await left(wakeUps.filter((id) => id !== finishedWakeUp)),
    0,
    "the unfinished jobs' wake-ups leave the queue with their rows",
  );
  t.equal(
    await left([finishedWakeUp]),
    1,
    "a finished job's wake-up is left to whoever takes it (it finds nothing to run)",
  );
  await db.query(sql.unsafe`select graphile_worker.complete_jobs(array[${finishedWakeUp}::bigint])`);
});

t.test('a worker never starts a job cancelled while it was queued', async (t) => {
  const cancelled = await enqueue(db, {
    kind: 'diag.steps',
    tenantId: member.tenantId,
    input: { steps: 1, delayMs: 10 },
  });
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

t.test("wake-ups fetched in batches: a session's turns run one at a time, in order, among other jobs", async (t) => {
  await withOwnOpenAIKey(db, config, member, 'sk-lanes-key-1234');
  const headers = { authorization: `Bearer ${member.token}`, 'x-tenant-id': member.tenantId };
  const sessionId = (
    await app.inject({
      method: 'POST',
      url: '/api/chat/sessions',
      headers,
      payload: { title: 'Lanes', model: 'openai/gpt-4o-mini' },
    })
  ).json().id as string;
  // Sent while no worker runs, so every turn waits in the queue together.
  const turns: string[] = [];
  for (let i = 0; i < 5; i++) {
    openai.enqueue({ reply: `answer ${i}`, chunks: 2, delayMs: 30 });
    const res = await app.inject({
      method: 'POST',
      url: '/api/chat/send',
      headers: { ...headers, 'idempotency-key': `lanes-turn-${i}` },
      payload: { sessionId, message: `question ${i}` },
    });
    t.equal(res.statusCode, 202, res.body);
    turns.push((res.json() as { jobId: string }).jobId);
  }
  const noops = await db.transaction((tx) =>
    enqueueJobs(
      tx,
      Array.from({ length: 60 }, () => ({ kind: 'diag.noop', tenantId: member.tenantId })),
    ),
  );

  await startTestWorker(t, databaseUrl, { ...overrides, WORKER_CONCURRENCY: '4' });
  const ids = sql.array([...turns, ...noops.map((j) => j.id)], 'uuid');
  await waitFor(
    'every job to succeed',
    async () =>
      (await db.oneFirst(
        sql.type(Count)`select count(*)::int as n from jobs where id = any(${ids}) and status = 'succeeded'`,
      )) === 65,
    30_000,
  );
  // started_at is Graphile's lock time, finished_at the result's commit: a
  // queue unlocks only when its job is let go, after its result.
  const spans = await db.any(sql.type(z.object({ id: z.string(), started: z.number(), finished: z.number() }))`
    select id::text, extract(epoch from started_at)::float8 as started, extract(epoch from finished_at)::float8 as finished
    from jobs where id = any(${sql.array(turns, 'uuid')}) order by started_at`);
  t.same(
    spans.map((s) => s.id),
    turns,
    'the turns started in the order they were sent',
  );
  t.ok(
    spans.every((s, i) => i === 0 || s.started >= spans[i - 1]!.finished),
    'each turn started after the one before it finished',
  );
  const answers = await db.anyFirst(sql.type(z.object({ content: z.string() }))`
    select content from chat_messages where session_id = ${sessionId} and role = 'assistant' order by seq`);
  t.same(
    answers,
    [0, 1, 2, 3, 4].map((i) => `answer ${i}`),
    'each turn answered in order',
  );
});

t.test('a wake-up that comes twice, or after its job ended, runs nothing again', async (t) => {
  const done = await enqueue(db, { kind: 'diag.steps', tenantId: member.tenantId, input: { steps: 1, delayMs: 0 } });
  const worker = await startTestWorker(t, databaseUrl, { WORKER_CONCURRENCY: '2' });
  await waitFor('the job to succeed', async () => (await statusOf(done)) === 'succeeded');
  const version = () =>
    db.oneFirst(sql.type(z.object({ v: z.number() }))`select version as v from jobs where id = ${done}`);
  const before = await version();
  // The same wake-up again, as a worker that lost its release would leave it.
  const seen: unknown[] = [];
  worker.events.on('job:success', ({ job }) => seen.push((job.payload as { jobId?: string }).jobId));
  await enqueueSystemJob(db, {
    kind: 'diag.steps',
    payload: { jobId: done, tenantId: member.tenantId, input: { steps: 1, delayMs: 0 } },
  });
  await waitFor('the repeated wake-up to be taken', async () => seen.includes(done));
  t.equal(await version(), before, 'the finished job was not written again');
  t.equal(await statusOf(done), 'succeeded');
});
