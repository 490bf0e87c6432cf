// Waiting never holds a worker slot (docs/engine.md): a retry's backoff, a
// Retry-After from the outside world, a runner not yet there. The attempt
// ends, the job is queued until its time with a wake-up then (its own, or its
// serial queue's, which it keeps holding), its slot runs other work
// meanwhile, and it still runs once, when its time comes.
import t from 'tap';
import { z } from 'zod';
import { sql } from '../../core/db/pool.ts';
import { enqueueJobs } from '../../core/jobs/enqueue.ts';
import { startTestServer } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { createMember, enqueue } from '../helpers/fixtures.ts';
import { waitFor } from '../helpers/wait.ts';
import { linkWebhookChannel } from '../helpers/webhook-channel.ts';
import { startWebhookReceiver } from '../helpers/webhook-receiver.ts';
import { startTestWorker } from '../helpers/worker.ts';

const SECRET = 'webhook-signing-secret-for-waits';
const receiver = await startWebhookReceiver(t, SECRET);
const databaseUrl = await createTestDatabase(t);
const overrides = { PROVIDER_ALLOW_PRIVATE_URLS: 'true' };
const api = await startTestServer(t, databaseUrl, overrides);
const { app, db } = api;
const member = await createMember(db, 'admin');

const Job = z.object({
  status: z.string(),
  attempts: z.number(),
  error: z.unknown(),
  started_at: z.string().nullable(),
  finished_at: z.string().nullable(),
  updated_at: z.string(),
});
const jobRow = (id: string) =>
  db.one(sql.type(Job)`select status, attempts, error, started_at, finished_at, updated_at from jobs where id = ${id}`);
/** The job's wake-up in Graphile's queue (public view): its own, a wait's (keyed by its id), or its serial queue's. */
const wakeUp = (id: string) =>
  db.maybeOne(sql.type(
    z.object({
      key: z.string().nullable(),
      locked_by: z.string().nullable(),
      due_in_s: z.number(),
      priority: z.number(),
    }),
  )`
  select g.key, g.locked_by, extract(epoch from g.run_at - now())::float8 as due_in_s, g.priority
  from jobs j join graphile_worker.jobs g on g.id = j.graphile_job_id or g.key = 'j:' || j.id::text or g.key = 'q:' || j.queue_name
  where j.id = ${id} order by g.id desc limit 1`);

t.test(
  'a failed attempt with a Retry-After waits: its one slot runs other jobs meanwhile, then it succeeds',
  async (t) => {
    await startTestWorker(t, databaseUrl, { ...overrides, WORKER_CONCURRENCY: '1' });
    const failing = await enqueue(db, {
      kind: 'diag.steps',
      tenantId: member.tenantId,
      input: { steps: 1, delayMs: 0, failAttemptsBelow: 2, retryAfterMs: 1_500 },
    });
    const waiting = await waitFor('the first attempt to fail', async () => {
      const row = await jobRow(failing);
      return (row.error as { retrying?: boolean } | null)?.retrying ? row : null;
    });
    t.match(waiting, { status: 'queued', attempts: 1, error: { code: 'diag_transient', retrying: true } });
    const retryAt = new Date((waiting.error as { retryAt: string }).retryAt).getTime();
    t.ok(retryAt > Date.now() + 500, 'error.retryAt says when the next attempt comes');
    const wake = await wakeUp(failing);
    t.match(
      wake,
      { key: `j:${failing}`, locked_by: null, priority: -1 },
      'a wake-up of its own, held by no worker, ahead of new work once due',
    );
    t.ok(wake!.due_in_s > 0.5, `at its Retry-After (in ${wake!.due_in_s.toFixed(1)} s)`);
    const others = await db.transaction((tx) =>
      enqueueJobs(
        tx,
        Array.from({ length: 3 }, () => ({ kind: 'diag.noop', tenantId: member.tenantId })),
      ),
    );
    await waitFor('the others to finish on the one slot', async () => {
      for (const job of others) if ((await jobRow(job.id)).status !== 'succeeded') return false;
      return true;
    });
    t.equal((await jobRow(failing)).status, 'queued', 'while the failed job still waits');
    const done = await waitFor('the retry to succeed', async () => {
      const row = await jobRow(failing);
      return row.status === 'succeeded' ? row : null;
    });
    t.equal(done.attempts, 2, 'on its second attempt');
    t.ok(new Date(done.finished_at!).getTime() >= retryAt - 50, 'not before its Retry-After');
    // Graphile lets its job go once the task has returned, a moment after the row says succeeded.
    t.ok(
      await waitFor('the wake-up to leave the queue', async () => (await wakeUp(failing)) === null),
      'and left the queue',
    );
  },
);

t.test(
  'a job of a serial queue cancelled while it waits ends at once, and the next job of its queue runs',
  async (t) => {
    await startTestWorker(t, databaseUrl, overrides);
    const jobId = await enqueue(db, {
      kind: 'diag.steps',
      tenantId: member.tenantId,
      queueName: 'waits:held',
      input: { steps: 1, delayMs: 0, failAttemptsBelow: 5, retryAfterMs: 60_000 },
    });
    const behind = await enqueue(db, { kind: 'diag.noop', tenantId: member.tenantId, queueName: 'waits:held' });
    await waitFor(
      'the job to wait',
      async () => ((await jobRow(jobId)).error as { retrying?: boolean } | null)?.retrying === true,
    );
    const wake = await wakeUp(jobId);
    t.match(wake, { key: 'q:waits:held', locked_by: null }, 'its queue wakes with it');
    t.ok(wake!.due_in_s > 50, 'at its time');
    t.equal((await jobRow(behind)).status, 'queued', 'so the next job of the queue waits behind it');
    const cancelled = await app.inject({
      method: 'POST',
      url: `/api/jobs/${jobId}/cancel`,
      headers: { authorization: `Bearer ${member.token}` },
    });
    t.equal(cancelled.json().status, 'cancelled');
    await waitFor('the job behind it to run', async () => (await jobRow(behind)).status === 'succeeded');
  },
);

t.test(
  "a job cancelled while its wake-up sat in a worker's batch does not run when the batch is given back",
  async (t) => {
    const worker = await startTestWorker(t, databaseUrl, { ...overrides, WORKER_CONCURRENCY: '1' });
    // One transaction: the busy job takes the one slot (until it is cancelled
    // below, however slow the machine), and the held one, after it in the fair
    // order, waits in the worker's fetched batch.
    const [busyJob, held] = await db.transaction((tx) =>
      enqueueJobs(tx, [
        { kind: 'diag.steps', tenantId: member.tenantId, input: { steps: 1, delayMs: 60_000 } },
        { kind: 'diag.steps', tenantId: member.tenantId, input: { steps: 1, delayMs: 0 } },
      ]),
    );
    const busy = busyJob!.id;
    await waitFor('the one slot to be busy', async () => (await jobRow(busy)).status === 'running');
    await waitFor('the job to be held in the batch', async () =>
      (await wakeUp(held!.id))?.locked_by?.startsWith('pool-'),
    ).catch(async (error: Error) => {
      throw new Error(
        `${error.message}: ${JSON.stringify(await db.any(sql.unsafe`select id, task_identifier, run_at, now() as now, locked_by, attempts from graphile_worker.jobs`))}`,
      );
    });
    const cancel = (id: string) =>
      app.inject({
        method: 'POST',
        url: `/api/jobs/${id}/cancel`,
        headers: { authorization: `Bearer ${member.token}` },
      });
    await cancel(held!.id);
    await cancel(busy);
    await worker.stop(); // gives the batch back
    await startTestWorker(t, databaseUrl, overrides);
    await waitFor('its wake-up to be taken and dropped', async () => (await wakeUp(held!.id)) === null);
    t.match(await jobRow(held!.id), { status: 'cancelled', started_at: null }, 'it never ran');
  },
);

t.test(
  "a channel answering 429 Retry-After: the reply waits, the one I/O slot runs another tenant's turn meanwhile, the reply is sent once",
  async (t) => {
    await startTestWorker(t, databaseUrl, { ...overrides, WORKER_IO_CONCURRENCY: '1' });
    const channel = await linkWebhookChannel(
      api,
      { authorization: `Bearer ${member.token}`, 'x-tenant-id': member.tenantId },
      receiver,
      SECRET,
    );
    receiver.state.script.push({ status: 429, headers: { 'retry-after': '2' }, body: { error: 'slow down' } });
    const before = receiver.state.replies.length;
    const { jobId: turn } = await channel.say('Hello, slowly');
    const delivery = await waitFor('the refused delivery to wait', async () => {
      const row = await db.maybeOne(sql.type(z.object({ id: z.string(), error: z.unknown() }))`
      select id, error from jobs where kind = 'channel.deliver' and tenant_id = ${member.tenantId} order by created_at desc limit 1`);
      return row && (row.error as { retrying?: boolean } | null)?.retrying ? row : null;
    });
    t.match(
      await wakeUp(delivery.id),
      { locked_by: null },
      "its channel's queue wakes at the Retry-After, held by no worker",
    );

    const other = await createMember(db, 'admin');
    const headers = { authorization: `Bearer ${other.token}`, 'x-tenant-id': other.tenantId };
    const sessionId = (await app.inject({ method: 'POST', url: '/api/chat/sessions', headers, payload: {} })).json().id;
    const sent = (
      await app.inject({
        method: 'POST',
        url: '/api/chat/send',
        headers: { ...headers, 'idempotency-key': 'waits-other-1' },
        payload: { sessionId, message: 'meanwhile' },
      })
    ).json();
    await waitFor("the other tenant's turn", async () => (await jobRow(sent.jobId)).status === 'succeeded');
    t.equal((await jobRow(delivery.id)).status, 'queued', 'it ran while the reply waited on the one slot');
    t.equal(receiver.state.replies.length, before, 'the reply is not sent yet');

    await waitFor('the reply', async () => (await jobRow(delivery.id)).status === 'succeeded', 20_000);
    const answer = await db.oneFirst(
      sql.type(z.object({ content: z.string() }))`select content from chat_messages where job_id = ${turn}`,
    );
    t.same(
      receiver.state.replies.slice(before).map((r) => r.text),
      [answer],
      'sent once',
    );
  },
);

t.test(
  "a channel's replies keep their order: a later reply queued while an earlier one waits goes after it",
  async (t) => {
    const worker = await startTestWorker(t, databaseUrl, overrides);
    const other = await createMember(db, 'admin');
    const channel = await linkWebhookChannel(
      api,
      { authorization: `Bearer ${other.token}`, 'x-tenant-id': other.tenantId },
      receiver,
      SECRET,
    );
    const before = receiver.state.replies.length;
    receiver.state.script.push({ status: 503, headers: { 'retry-after': '1' }, body: { error: 'busy' } });
    await channel.say('first');
    const waiting = await waitFor('the first reply to wait', async () => {
      const row = await db.maybeOne(sql.type(z.object({ id: z.string(), error: z.unknown() }))`
      select id, error from jobs where kind = 'channel.deliver' and tenant_id = ${other.tenantId} order by created_at desc limit 1`);
      return row && (row.error as { retrying?: boolean } | null)?.retrying ? row : null;
    });
    t.match(
      await wakeUp(waiting.id),
      {
        key: `q:${await db.oneFirst(sql.type(z.object({ q: z.string() }))`select queue_name as q from jobs where id = ${waiting.id}`)}`,
        locked_by: null,
      },
      'waiting, still the next of its queue',
    );
    const { jobId: secondTurn } = await channel.say('second');
    await waitFor('the second turn', async () => (await jobRow(secondTurn!)).status === 'succeeded');
    await waitFor('both replies', async () => receiver.state.replies.length >= before + 2, 20_000);
    const texts = await db.anyFirst(sql.type(z.object({ content: z.string() }))`
    select m.content from chat_messages m join chat_sessions s on s.id = m.session_id where s.tenant_id = ${other.tenantId} and m.role = 'assistant' order by m.seq`);
    t.same(
      receiver.state.replies.slice(before).map((r) => r.text),
      texts,
      'sent in the order of the messages',
    );
    await worker.stop();
  },
);
