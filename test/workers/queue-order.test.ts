// Jobs of one serial queue run one at a time, in the order they were added
// (docs/engine.md): a queue's wake-up claims its oldest unfinished job, and
// only when that job is queued and due; when a job ends, waits, or loses its
// worker, a trigger wakes the queue again. Order is the data's, so it holds
// whatever order Graphile Worker hands wake-ups out in.
import pg from 'pg';
import t from 'tap';
import { z } from 'zod';
import { sql } from '../../core/db/pool.ts';
import { enqueueJobs } from '../../core/jobs/enqueue.ts';
import { claimQueues, completeJob, requestCancel, waitJob } from '../../core/jobs/lifecycle.ts';
import { releaseWorkerJobs } from '../../core/jobs/liveness.ts';
import { startTestServer } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { createMember, enqueue } from '../helpers/fixtures.ts';
import { waitFor } from '../helpers/wait.ts';
import { startTestWorker } from '../helpers/worker.ts';

const databaseUrl = await createTestDatabase(t);
const api = await startTestServer(t, databaseUrl);
const { db } = api;
const member = await createMember(db, 'admin');

const client = new pg.Client({ connectionString: databaseUrl });
await client.connect();
t.teardown(() => client.end());
const claim = (queue: string, holder: string) => claimQueues(client, [{ queue, holder }]).then(([c]) => c!);
const wakeUp = (queue: string) =>
  db.maybeOne(sql.type(z.object({ run_at: z.string(), priority: z.number(), locked_by: z.string().nullable() }))`
  select run_at::text, priority, locked_by from graphile_worker.jobs where key = ${`q:${queue}`}`);

t.test(
  'a queue runs its oldest unfinished job, one at a time; an end, a wait, a cancel or a lost worker wakes it',
  async (t) => {
    const queue = 'order:claims';
    const [a, b, c] = await db.transaction((tx) =>
      enqueueJobs(
        tx,
        ['a', 'b', 'c'].map((n) => ({ kind: 'diag.noop', tenantId: member.tenantId, queueName: queue, input: { n } })),
      ),
    );
    t.ok(await wakeUp(queue), 'the first job woke its queue');
    t.match(
      await claim(queue, 'pool-1'),
      { outcome: 'claimed', jobId: a!.id, attempt: 1, input: { n: 'a' } },
      'the oldest job, marked running',
    );
    t.match(await claim(queue, 'pool-2'), { outcome: 'busy' }, 'a second wake-up finds it held');
    t.ok(await completeJob(db, a!.id, 1, null));
    t.ok(await wakeUp(queue), 'its end woke the queue');
    t.match(await claim(queue, 'pool-2'), { outcome: 'claimed', jobId: b!.id });
    t.ok(await waitJob(db, { jobId: b!.id, attempt: 1, keepAttempt: false, until: new Date(Date.now() + 60_000) }));
    t.match(await claim(queue, 'pool-3'), { outcome: 'later' }, 'b waits, and c behind it');
    t.ok(new Date((await wakeUp(queue))!.run_at).getTime() > Date.now() + 50_000, "the queue wakes at b's time");
    t.match(await requestCancel(db, b!.id), { status: 'cancelled' });
    t.match(await claim(queue, 'pool-3'), { outcome: 'claimed', jobId: c!.id }, 'cancelling b let c go');
    // The worker holding c stops: c is queued again and its queue wakes.
    await db.transaction((tx) => releaseWorkerJobs(tx, ['pool-3']));
    t.match(
      await claim(queue, 'pool-4'),
      { outcome: 'claimed', jobId: c!.id, attempt: 2 },
      'the next attempt of the same job, not the one behind it',
    );
    t.ok(await completeJob(db, c!.id, 2, null));
    t.match(await claim(queue, 'pool-4'), { outcome: 'empty' });
  },
);

t.test('a claim that meets the end of the job ahead waits for its commit, then takes the next one', async (t) => {
  const queue = 'order:race';
  const [first, second] = await db.transaction((tx) =>
    enqueueJobs(
      tx,
      [0, 1].map(() => ({ kind: 'diag.noop', tenantId: member.tenantId, queueName: queue })),
    ),
  );
  t.match(await claim(queue, 'pool-a'), { outcome: 'claimed', jobId: first!.id });
  const ending = new pg.Client({ connectionString: databaseUrl });
  await ending.connect();
  t.teardown(() => ending.end());
  await ending.query('begin');
  await ending.query(`update jobs set status = 'succeeded', finished_at = now() where id = $1`, [first!.id]);
  const racing = claim(queue, 'pool-b');
  await waitFor(
    'the claim to wait on the row',
    async () =>
      (await db.oneFirst(sql.type(z.object({ n: z.number() }))`
    select count(*)::int as n from pg_stat_activity where wait_event_type = 'Lock' and query like '%queue_claim%'`)) >
      0,
  );
  await ending.query('commit');
  t.match(
    await racing,
    { outcome: 'claimed', jobId: second!.id },
    "the second job, after the first one's end committed",
  );
});

t.test(
  "a job added behind an unfinished one adds no wake-up: that job's end wakes the queue, also an end racing the add",
  async (t) => {
    const queue = 'order:behind';
    const add = (tx: Parameters<typeof enqueueJobs>[0]) =>
      enqueueJobs(tx, [{ kind: 'diag.noop', tenantId: member.tenantId, queueName: queue }]).then(([job]) => job!);
    const head = await db.transaction(add);
    t.match(await claim(queue, 'pool-h'), { outcome: 'claimed', jobId: head.id });
    // As a worker would: the wake-up that led to the claim is done.
    await db.query(sql.unsafe`select graphile_worker.remove_job(${`q:${queue}`})`);
    const second = await db.transaction(add);
    t.equal(await wakeUp(queue), null, 'added behind the running head: no wake-up of its own');
    t.ok(await completeJob(db, head.id, 1, null));
    t.ok(await wakeUp(queue), "the head's end woke the queue");
    t.match(await claim(queue, 'pool-h'), { outcome: 'claimed', jobId: second.id });

    // A job added while the head ends: the add locked the head, so the end waits for the add's commit and then sees it.
    let commit!: () => void;
    const gate = new Promise<void>((resolve) => (commit = resolve));
    let third: { id: string } | null = null;
    const adding = db.transaction(async (tx) => {
      third = await add(tx);
      await gate;
    });
    await waitFor('the add to hold its transaction open', async () => third);
    const ending = completeJob(db, second.id, 1, null);
    await waitFor(
      'the end to wait for the add',
      async () =>
        (await db.oneFirst(sql.type(z.object({ n: z.number() }))`
    select count(*)::int as n from pg_stat_activity where wait_event_type = 'Lock' and query like '%update jobs%'`)) >
        0,
    );
    commit();
    await adding;
    t.ok(await ending);
    t.ok(await wakeUp(queue), 'the end, after the add committed, woke the queue for the new job');
    t.match(await claim(queue, 'pool-h'), { outcome: 'claimed', jobId: third!.id });
  },
);

t.test(
  'three busy queues, retries, three workers fetching in batches: each job starts only after the one ahead of it succeeded',
  async (t) => {
    for (let w = 0; w < 3; w++) await startTestWorker(t, databaseUrl, { WORKER_CONCURRENCY: '3' });
    let seed = 7;
    const random = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    const QUEUES = 3,
      PER_QUEUE = 16;
    const ids: string[][] = Array.from({ length: QUEUES }, () => []);
    for (let i = 0; i < PER_QUEUE; i++) {
      for (let q = 0; q < QUEUES; q++) {
        const fail = random() < 0.35;
        ids[q]!.push(
          await enqueue(db, {
            kind: 'diag.steps',
            tenantId: member.tenantId,
            queueName: `order:many:${q}`,
            input: {
              steps: 1,
              delayMs: Math.floor(random() * 5),
              failAttemptsBelow: fail ? 2 : 0,
              retryAfterMs: 50 + Math.floor(random() * 200),
            },
          }),
        );
      }
    }
    const all = sql.array(ids.flat(), 'uuid');
    await waitFor(
      'every job to succeed',
      async () =>
        (await db.oneFirst(
          sql.type(
            z.object({ n: z.number() }),
          )`select count(*)::int as n from jobs where id = any(${all}) and status = 'succeeded'`,
        )) ===
        QUEUES * PER_QUEUE,
      60_000,
    );
    const Row = z.object({ id: z.string(), started: z.number(), finished: z.number(), attempts: z.number() });
    const early: string[] = [];
    for (let q = 0; q < QUEUES; q++) {
      const rows = await db.any(sql.type(Row)`
      select j.id, extract(epoch from j.started_at)::float8 as started, extract(epoch from j.finished_at)::float8 as finished, j.attempts
      from unnest(${sql.array(ids[q]!, 'uuid')}) with ordinality as x(id, n) join jobs j on j.id = x.id order by x.n`);
      rows.forEach((row, i) => {
        if (i > 0 && row.started < rows[i - 1]!.finished)
          early.push(`queue ${q}: job ${i} started before job ${i - 1} succeeded`);
      });
    }
    t.same(early, [], 'none started early');
  },
);
