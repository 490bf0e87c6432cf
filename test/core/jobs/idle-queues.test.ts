// Idle queue rows are collected, never one a job is being added to: the
// collector waits for (or, past its lock wait, leaves to the next sweep)
// every transaction that writes queue rows, such as a send's.
import t from 'tap';
import { z } from 'zod';
import { sendBatch, turnQueue, type SendOutcome } from '../../../core/chat/send.ts';
import { createChatSession } from '../../../core/chat/sessions.ts';
import { sql } from '../../../core/db/pool.ts';
import { collectIdleQueues } from '../../../core/jobs/idle-queues.ts';
import { createTestDatabase, testPool } from '../../helpers/db.ts';
import { createMember } from '../../helpers/fixtures.ts';

const databaseUrl = await createTestDatabase(t);
const db = await testPool(t, databaseUrl);
const member = await createMember(db);
const queues = (names: string[]) => db.anyFirst(sql.type(z.object({ queue_name: z.string() }))`
  select queue_name from graphile_worker._private_job_queues where queue_name = any(${sql.array(names, 'text')}) order by queue_name`);
const sendIn = async (tx: Parameters<typeof sendBatch>[0], sessionId: string, key: string) =>
  (await sendBatch(tx, [{ tenantId: member.tenantId, userId: member.userId, idempotencyKey: key, sessionId, message: key, attachments: [] }], tx !== (db as never)))[0]!.value as SendOutcome;

t.test('deletes the queue rows no job uses and keeps those with a job', async (t) => {
  await db.query(sql.unsafe`select graphile_worker.complete_jobs(array[(graphile_worker.add_job('diag.noop', '{}'::json, queue_name => 'gc-idle')).id])`);
  const busy = await createChatSession(db, member.tenantId, member.userId, { title: 'Busy' });
  t.equal((await sendIn(db as never, busy.id, 'gc-busy-1')).kind, 'accepted');
  t.same(await queues(['gc-idle', turnQueue(busy.id)]), ['chat:' + busy.id, 'gc-idle'].sort());
  t.ok(((await collectIdleQueues(db)) ?? 0) >= 1, 'counts what it deleted');
  t.same(await queues(['gc-idle', turnQueue(busy.id)]), [turnQueue(busy.id)], 'the idle row is gone; the queued turn keeps its queue');
});

t.test('a send that has not committed yet holds the collector off, so its queue row stays', async (t) => {
  const session = await createChatSession(db, member.tenantId, member.userId, { title: 'Racing' });
  // The session's queue row is there and idle (its last turn done): the send finds it, and writes a job naming it.
  await db.query(sql.unsafe`select graphile_worker.complete_jobs(array[(graphile_worker.add_job('diag.noop', '{}'::json, queue_name => ${turnQueue(session.id)})).id])`);
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  let sent!: () => void;
  const wrote = new Promise<void>((resolve) => (sent = resolve));
  const sending = db.transaction(async (tx) => {
    const outcome = await sendIn(tx as never, session.id, 'gc-racing-1');
    sent();
    await held;
    return outcome;
  });
  await wrote;
  t.equal(await collectIdleQueues(db), null, 'not this time: the lock was not granted within its wait');
  release();
  t.equal((await sending).kind, 'accepted');
  await collectIdleQueues(db);
  t.same(await queues([turnQueue(session.id)]), [turnQueue(session.id)], "the session's queue row is there for its turn");
  const runnable = await db.oneFirst(sql.type(z.object({ n: z.number() }))`
    select count(*)::int as n from graphile_worker._private_jobs j join graphile_worker._private_job_queues q on q.id = j.job_queue_id
    where q.queue_name = ${turnQueue(session.id)}`);
  t.equal(runnable, 1, 'and the turn names it');
});
