// Jobs of one named queue run one at a time in the order they were added,
// whatever order Graphile Worker hands them out in (core/jobs/queue-order.ts):
// a later job handed out first gives its place back and waits behind the
// earlier one, without counting an attempt; a parked job that waits behind
// another never lets go of the queue the other holds. The last test is the
// case the soak found: a batch that held two jobs of a queue gave the later
// one back while the first ran; when the first finished before the give-back
// committed, a third job of the queue could run before the second.
import t from 'tap';
import { z } from 'zod';
import { sql } from '../../core/db/pool.ts';
import { enqueueJobs } from '../../core/jobs/enqueue.ts';
import { sweepDeadWorkers } from '../../core/jobs/liveness.ts';
import { PARKED_BY } from '../../core/jobs/park.ts';
import { startTestServer } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { createMember, enqueue } from '../helpers/fixtures.ts';
import { waitFor } from '../helpers/wait.ts';
import { startTestWorker } from '../helpers/worker.ts';

const databaseUrl = await createTestDatabase(t);
const overrides = { WORKER_PARK_SWEEP_MS: '100' };
const api = await startTestServer(t, databaseUrl, overrides);
const { db } = api;
const member = await createMember(db, 'admin');

const Job = z.object({ status: z.string(), attempts: z.number(), finished_at: z.string().nullable() });
const jobRow = (id: string) => db.one(sql.type(Job)`select status, attempts, finished_at from jobs where id = ${id}`);
const graphileId = (id: string) => db.oneFirst(sql.type(z.object({ graphile_job_id: z.string() }))`select graphile_job_id::text from jobs where id = ${id}`);
const steps = { steps: 1, delayMs: 0 };

t.test('a later job of a queue handed out first waits behind the earlier one, which runs first', async (t) => {
  const starts: string[] = [];
  const worker = await startTestWorker(t, databaseUrl, { ...overrides, WORKER_CONCURRENCY: '1' });
  let earlier = '';
  worker.events.on('job:start', ({ job }) => {
    const jobId = (job.payload as { jobId?: string }).jobId;
    if (jobId) starts.push(jobId === earlier ? 'earlier' : 'later');
  });
  const later = await db.transaction(async (tx) => {
    const [a, b] = await enqueueJobs(tx, [0, 1].map(() => ({ kind: 'diag.steps', tenantId: member.tenantId, queueName: 'order:handed-out-first', input: steps })));
    earlier = a!.id;
    // Graphile fetches by run_at: put the later job first in its order.
    await tx.query(sql.unsafe`
      update graphile_worker._private_jobs g set run_at = e.run_at - interval '1 second'
      from jobs lj, jobs ej, graphile_worker._private_jobs e
      where lj.id = ${b!.id} and ej.id = ${a!.id} and g.id = lj.graphile_job_id and e.id = ej.graphile_job_id`);
    return b!.id;
  });
  await waitFor('both to succeed', async () => (await jobRow(earlier)).status === 'succeeded' && (await jobRow(later)).status === 'succeeded');
  t.equal(starts[0], 'later', 'Graphile handed out the later job first');
  t.same(starts.slice(1), ['earlier', 'later'], 'it gave its place back: the earlier job ran, then the later one');
  const [a, b] = [await jobRow(earlier), await jobRow(later)];
  t.ok(new Date(a.finished_at!) <= new Date(b.finished_at!), 'the earlier job finished first');
  t.equal(b.attempts, 1, 'waiting behind it did not count as an attempt');
});

t.test('an earlier job of a kind no worker runs (a version gone) does not hold the queue', async (t) => {
  const queue = 'order:unknown-kind';
  const stranded = await enqueue(db, { kind: 'diag.retired', tenantId: member.tenantId, queueName: queue, input: {} });
  const later = await enqueue(db, { kind: 'diag.steps', tenantId: member.tenantId, queueName: queue, input: steps });
  await startTestWorker(t, databaseUrl, overrides);
  await waitFor('the later job to succeed', async () => (await jobRow(later)).status === 'succeeded');
  t.equal((await jobRow(stranded)).status, 'queued', 'the stranded one waits for a worker that runs it');
});

t.test('a job behind a parked earlier one waits for it, and its own wake does not let go of the queue the earlier one holds', async (t) => {
  const queue = 'order:behind-parked';
  const earlier = await enqueue(db, { kind: 'diag.steps', tenantId: member.tenantId, queueName: queue, input: { ...steps, failAttemptsBelow: 2, retryAfterMs: 2_000 } });
  const worker = await startTestWorker(t, databaseUrl, overrides);
  const finished: string[] = [];
  let later = '';
  worker.events.on('job:success', ({ job }) => {
    const jobId = (job.payload as { jobId?: string }).jobId;
    if (jobId === earlier || jobId === later) finished.push(jobId === earlier ? 'earlier' : 'later');
  });
  const Held = z.object({ job: z.string().nullable(), queue: z.string().nullable(), job_until: z.string().nullable(), queue_until: z.string().nullable() });
  const held = (id: string) => async () => db.one(sql.type(Held)`
    select g.locked_by as job, q.locked_by as queue, g.locked_at::text as job_until, q.locked_at::text as queue_until
    from graphile_worker._private_jobs g join graphile_worker._private_job_queues q on q.id = g.job_queue_id where g.id = ${await graphileId(id)}`);
  await waitFor('the earlier job to park with its queue', async () => (await held(earlier)()).queue === PARKED_BY);
  // The case the check is for: the queue let go while its earlier job still waits.
  await db.query(sql.unsafe`update graphile_worker._private_job_queues set locked_by = null, locked_at = null where queue_name = ${queue}`);
  later = await enqueue(db, { kind: 'diag.steps', tenantId: member.tenantId, queueName: queue, input: steps });
  const waiting = await waitFor('the later job to wait behind it', async () => {
    const row = await held(later)();
    return row.job === PARKED_BY ? row : null;
  });
  const earlierUntil = new Date((await held(earlier)()).job_until!);
  t.ok(new Date(waiting.job_until!) > earlierUntil, 'until just after the earlier job\'s time');
  t.equal((await jobRow(later)).status, 'queued', 'still queued, not started');
  await waitFor('both to succeed', async () => (await jobRow(earlier)).status === 'succeeded' && (await jobRow(later)).status === 'succeeded', 20_000);
  t.same(finished, ['earlier', 'later'], 'in the order they were added');
  t.equal((await jobRow(later)).attempts, 1, 'the later job ran once');
});

t.test('waking, sweeping or cancelling a parked job lets go of its queue only when it is the one holding it', async (t) => {
  const queue = 'order:holder';
  const [holderJob, behindJob] = [
    await enqueue(db, { kind: 'diag.steps', tenantId: member.tenantId, queueName: queue, input: steps }),
    await enqueue(db, { kind: 'diag.steps', tenantId: member.tenantId, queueName: queue, input: steps }),
  ];
  const [holder, behind] = [await graphileId(holderJob), await graphileId(behindJob)];
  // The holder parked with its queue for a minute; the other parked behind it, due now.
  await db.transaction(async (tx) => {
    await tx.query(sql.unsafe`update graphile_worker._private_jobs set locked_by = ${PARKED_BY}, locked_at = now() + interval '1 minute' where id = ${holder}`);
    await tx.query(sql.unsafe`update graphile_worker._private_job_queues set locked_by = ${PARKED_BY}, locked_at = now() + interval '1 minute' where queue_name = ${queue}`);
  });
  await db.query(sql.unsafe`update graphile_worker._private_jobs set locked_by = ${PARKED_BY}, locked_at = now() - interval '1 second' where id = ${behind}`);
  const queueHolder = () => db.maybeOneFirst(sql.unsafe`select locked_by from graphile_worker._private_job_queues where queue_name = ${queue}`);
  t.ok(Number(await db.oneFirst(sql.unsafe`select wake_parked_jobs()`)) >= 1, 'the due job woke');
  t.equal(await queueHolder(), PARKED_BY, 'the queue stays with its holder');
  await db.query(sql.unsafe`update graphile_worker._private_jobs set locked_by = ${PARKED_BY}, locked_at = now() - interval '1 hour' where id = ${behind}`);
  const swept = await sweepDeadWorkers(db, 1_000);
  t.notOk(swept.unlockedWorkers.includes(PARKED_BY), 'the dead-worker sweep takes a parked job long past its time for nobody\'s');
  t.equal(await queueHolder(), PARKED_BY, 'and leaves the queue with its holder');
  await db.query(sql.unsafe`update graphile_worker._private_jobs set locked_by = ${PARKED_BY}, locked_at = now() + interval '30 seconds' where id = ${behind}`);
  await db.query(sql.unsafe`update jobs set status = 'cancelled', finished_at = now() where id = ${behindJob}`);
  t.equal(await queueHolder(), PARKED_BY, 'cancelling the job behind it leaves the queue held');
  await db.query(sql.unsafe`update jobs set status = 'cancelled', finished_at = now() where id = ${holderJob}`);
  t.equal(await queueHolder(), null, 'cancelling the holder lets the queue go');
  await db.query(sql.unsafe`update graphile_worker._private_job_queues set locked_by = ${PARKED_BY}, locked_at = now() - interval '1 second' where queue_name = ${queue}`);
  await db.query(sql.unsafe`select wake_parked_jobs()`);
  t.equal(await queueHolder(), null, 'a parked queue whose holder is gone is let go when its time has passed');
});

t.test('three busy queues, parked retries, three workers fetching in batches: each job runs only after the one ahead of it succeeded', async (t) => {
  const where = new Map<string, { q: number; i: number }>();
  // Every attempt that ran its handler (succeeded, or failed for itself: not one that waited behind another).
  const log: Array<{ ran: 'succeeded' | 'failed'; q: number; i: number; worker: number; at: number; error?: string }> = [];
  for (let w = 0; w < 3; w++) {
    const worker = await startTestWorker(t, databaseUrl, { ...overrides, WORKER_CONCURRENCY: '3' });
    worker.events.on('job:success', ({ job }) => {
      const at = where.get((job.payload as { jobId?: string }).jobId ?? '');
      if (at) log.push({ ran: 'succeeded', ...at, worker: w, at: performance.now() });
    });
    worker.events.on('job:error', ({ job, error }) => {
      const at = where.get((job.payload as { jobId?: string }).jobId ?? '');
      if (at && !/waits for job/.test((error as Error).message)) log.push({ ran: 'failed', ...at, worker: w, at: performance.now(), error: (error as Error).message });
    });
  }
  let seed = 7;
  const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  // Few queues, many jobs each: batches often hold several jobs of one queue.
  const QUEUES = 3, PER_QUEUE = 16;
  for (let i = 0; i < PER_QUEUE; i++) {
    for (let q = 0; q < QUEUES; q++) {
      const fail = random() < 0.35;
      const id = await enqueue(db, { kind: 'diag.steps', tenantId: member.tenantId, queueName: `order:many:${q}`,
        input: { steps: 1, delayMs: Math.floor(random() * 5), failAttemptsBelow: fail ? 2 : 0, retryAfterMs: 50 + Math.floor(random() * 200) } });
      where.set(id, { q, i });
    }
  }
  await waitFor('every job to succeed', async () => log.filter((e) => e.ran === 'succeeded').length >= QUEUES * PER_QUEUE, 60_000);
  const early: string[] = [];
  for (let q = 0; q < QUEUES; q++) {
    const succeeded = new Set<number>();
    for (const e of log.filter((e) => e.q === q)) {
      if (e.i > 0 && !succeeded.has(e.i - 1)) early.push(`queue ${q}: job ${e.i} ${e.ran} before job ${e.i - 1} succeeded`);
      if (e.ran === 'succeeded') succeeded.add(e.i);
    }
  }
  if (early.length) t.comment(JSON.stringify(log.filter((e) => early.some((x) => x.startsWith(`queue ${e.q}:`)))));
  t.same(early, [], 'none ran early');
});
