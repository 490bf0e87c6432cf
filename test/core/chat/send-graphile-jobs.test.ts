// A send round writes its turn jobs into Graphile Worker's table itself
// (migration 0035) instead of calling add_jobs(). These prove it writes what
// add_jobs() writes for the same specs, whether the session's queue row is
// there or made for its first turn (and the task row, if it went missing),
// keeps the sends' order, writes nothing for a refused send, and announces
// the jobs once per round.
import pg from 'pg';
import t from 'tap';
import { z } from 'zod';
import { CHAT_TURN_KIND, sendBatch, turnQueue, type SendInput, type SendOutcome } from '../../../core/chat/send.ts';
import { createChatSession } from '../../../core/chat/sessions.ts';
import { sql } from '../../../core/db/pool.ts';
import { jobRecords } from '../../../core/jobs/enqueue.ts';
import { createTestDatabase, testPool } from '../../helpers/db.ts';
import { createMember } from '../../helpers/fixtures.ts';
import { waitFor } from '../../helpers/wait.ts';

const databaseUrl = await createTestDatabase(t);
const db = await testPool(t, databaseUrl);
const member = await createMember(db);
let keys = 0;
const send = (sessionId: string, message: string): SendInput => ({
  tenantId: member.tenantId, userId: member.userId, idempotencyKey: `graphile-${++keys}`, sessionId, message, attachments: [],
});

// Everything of a Graphile job but its identity and times.
const GraphileJob = z.object({
  id: z.string(), queue_name: z.string().nullable(), task_identifier: z.string(), payload: z.unknown(), priority: z.number(),
  max_attempts: z.number(), attempts: z.number(), key: z.string().nullable(), flags: z.unknown(), revision: z.number(),
  locked_at: z.string().nullable(), last_error: z.string().nullable(), is_available: z.boolean(), runs_now: z.boolean(),
});
const graphileJobs = (ids: readonly string[]) => db.any(sql.type(GraphileJob)`
  select j.id::text, q.queue_name, k.identifier as task_identifier, j.payload::jsonb as payload, j.priority, j.max_attempts, j.attempts,
    j.key, j.flags, j.revision, j.locked_at::text, j.last_error, j.is_available, j.run_at <= now() as runs_now
  from graphile_worker._private_jobs j join graphile_worker._private_tasks k on k.id = j.task_id
  left join graphile_worker._private_job_queues q on q.id = j.job_queue_id
  where j.id = any(${sql.array(ids, 'int8')}) order by j.id`);
const strip = ({ id: _id, ...rest }: z.infer<typeof GraphileJob>) => rest;
const jobOf = (job: { payload: unknown }) => (job.payload as { jobId: string }).jobId;

t.test("a round's turn jobs are the rows add_jobs() writes for the same specs, in the sends' order", async (t) => {
  const [a, b] = [await createChatSession(db, member.tenantId, member.userId, { title: 'A' }), await createChatSession(db, member.tenantId, member.userId, { title: 'B' })];
  // Neither the task nor these sessions' queues exist yet: the round adds them.
  await db.query(sql.unsafe`delete from graphile_worker._private_tasks where identifier = ${CHAT_TURN_KIND}
    and not exists (select 1 from graphile_worker._private_jobs j where j.task_id = _private_tasks.id)`);
  const sends = [send(a.id, 'one'), send(b.id, 'two'), send(a.id, 'three')];
  const outcomes = (await sendBatch(db as never, sends, false)).map((o) => o.value as SendOutcome & { kind: 'accepted' });
  t.same(outcomes.map((o) => o.kind), ['accepted', 'accepted', 'accepted']);
  const jobIds = outcomes.map((o) => o.body.jobId);
  const linked = await db.anyFirst(sql.type(z.object({ g: z.string() }))`
    select graphile_job_id::text as g from jobs where id = any(${sql.array(jobIds, 'uuid')}) order by array_position(${sql.array(jobIds, 'uuid')}, id)`);
  const ours = await graphileJobs(linked);
  t.same(ours.map((j) => j.id), linked, "one Graphile job per send, numbered in the sends' order (a session's turns run in that order)");
  t.same(ours.map((j) => j.queue_name), [turnQueue(a.id), turnQueue(b.id), turnQueue(a.id)], "each in its session's queue");

  // The same specs through Graphile's add_jobs(), for comparison.
  const { workerSpecs } = jobRecords(outcomes.map((o, i) => ({
    id: o.body.jobId, kind: CHAT_TURN_KIND, tenantId: member.tenantId, queueName: turnQueue(sends[i]!.sessionId),
    input: { sessionId: sends[i]!.sessionId, userMessageId: o.body.messageId }, sessionId: sends[i]!.sessionId, maxAttempts: 8,
  })));
  const theirs = await db.anyFirst(sql.type(z.object({ id: z.string() }))`
    select id::text from graphile_worker.add_jobs(array(
      select json_populate_record(null::graphile_worker.job_spec, spec) from json_array_elements(${sql.json(workerSpecs as never)}) as spec))`);
  // (add_jobs() numbers its jobs in no particular order: compare them by platform job.)
  const byJob = (jobs: ReadonlyArray<z.infer<typeof GraphileJob>>) => jobs.map(strip).sort((x, y) => jobOf(x).localeCompare(jobOf(y)));
  t.same(byJob(ours), byJob(await graphileJobs(theirs)), 'payload, queue, task, attempts, priority, flags and state as add_jobs() writes them');
  await db.query(sql.unsafe`delete from graphile_worker._private_jobs where id = any(${sql.array(theirs, 'int8')})`);

  // Both queue rows are there now: the next round finds them.
  const [again] = (await sendBatch(db as never, [send(b.id, 'four')], false)).map((o) => o.value as SendOutcome & { kind: 'accepted' });
  const [next] = await graphileJobs(await db.anyFirst(sql.type(z.object({ g: z.string() }))`select graphile_job_id::text as g from jobs where id = ${again!.body.jobId}`));
  t.equal(next!.queue_name, turnQueue(b.id), 'a later turn joins its session’s queue');
  t.ok(Number(next!.id) > Number(ours[2]!.id), 'after the earlier turns');
});

t.test('a refused send writes no Graphile row either', async (t) => {
  const graphileRows = () => db.one(sql.type(z.object({ tasks: z.number(), queues: z.number(), jobs: z.number() }))`
    select (select count(*) from graphile_worker._private_tasks)::int as tasks, (select count(*) from graphile_worker._private_job_queues)::int as queues,
      (select count(*) from graphile_worker._private_jobs)::int as jobs`);
  const before = await graphileRows();
  const [outcome] = await sendBatch(db as never, [send('00000000-0000-4000-8000-000000000000', 'nobody')], false);
  t.match(outcome!.value, { name: 'SessionNotFoundError' }, 'no such session');
  t.same(await graphileRows(), before, 'no task, queue or job row');
});

t.test('one jobs:insert notification per round that adds jobs, and none for a round of replays', async (t) => {
  const session = await createChatSession(db, member.tenantId, member.userId, { title: 'Notify' });
  const listener = new pg.Client({ connectionString: databaseUrl });
  await listener.connect();
  t.teardown(() => listener.end());
  const heard: Array<{ count: number }> = [];
  listener.on('notification', (n) => n.channel === 'jobs:insert' && heard.push(JSON.parse(n.payload ?? '{}') as { count: number }));
  await listener.query('listen "jobs:insert"');
  const sends = [send(session.id, 'first'), send(session.id, 'second')];
  await sendBatch(db as never, sends, false);
  await waitFor('the round\'s notification', async () => heard.length > 0);
  t.match(heard, [{ count: 2 }], 'one notification counting both jobs');
  heard.length = 0;
  const replays = await sendBatch(db as never, sends, false);
  t.same(replays.map((o) => (o.value as SendOutcome).kind), ['replayed', 'replayed']);
  // A marker notification after the replays: everything sent before it has arrived when it does.
  await db.query(sql.unsafe`select pg_notify('jobs:insert', '{"count":0,"marker":true}')`);
  await waitFor('the marker notification', async () => heard.length > 0);
  t.same(heard, [{ count: 0, marker: true }], 'the replays announced nothing');
});
