// The chat send's batch path writes the idempotency record, the message and
// the turn job in one statement. A batch whose statement fails is retried
// send by send: the good sends land once each, and replaying their keys
// answers the same job, with nothing written twice.
import t from 'tap';
import { z } from 'zod';
import { sendBatch, type SendInput, type SendOutcome } from '../../../core/chat/send.ts';
import { createChatSession } from '../../../core/chat/sessions.ts';
import { sql } from '../../../core/db/pool.ts';
import { GroupCommitter } from '../../../core/jobs/group-commit.ts';
import { testLogger } from '../../helpers/config.ts';
import { createTestDatabase, testPool } from '../../helpers/db.ts';
import { createMember } from '../../helpers/fixtures.ts';

const databaseUrl = await createTestDatabase(t);
const db = await testPool(t, databaseUrl);
const member = await createMember(db);
const session = await createChatSession(db, member.tenantId, member.userId, { title: 'Batch' });
const input = (key: string, message: string): SendInput => ({
  tenantId: member.tenantId, userId: member.userId, idempotencyKey: key, sessionId: session.id, message, attachments: [],
});
const counts = () =>
  db.one(sql.type(z.object({ messages: z.number(), records: z.number(), jobs: z.number(), graphile: z.number(), events: z.number() }))`
    select (select count(*) from chat_messages)::int as messages,
      (select count(*) from idempotency_records where scope = 'chat.send')::int as records,
      (select count(*) from jobs where kind = 'chat.turn')::int as jobs,
      (select count(*) from graphile_worker.jobs where task_identifier = 'chat.turn')::int as graphile,
      (select count(*) from session_job_events where event = 'queued')::int as events`);

t.test('a batch that fails halfway: each good send once, the bad one alone fails, replays answer the same jobs', async (t) => {
  // One in flight: the first send goes alone, the next five share a batch.
  const committer = new GroupCommitter(db, { maxInFlight: 1, logger: testLogger('group-commit') });
  const submit = (i: SendInput) => committer.submitBatched(sendBatch, i).then((r) => r.value as SendOutcome);
  // PostgreSQL refuses NUL in text: the statement of the batch holding it fails as a whole.
  const inputs = [input('key-first', 'first'), input('key-a', 'a'), input('key-b', 'b'), input('key-bad', 'bad \u0000 text'), input('key-c', 'c'), input('key-d', 'd')];
  const outcomes = await Promise.allSettled(inputs.map(submit));
  t.equal(outcomes[3]!.status, 'rejected', 'the bad send fails');
  const accepted = outcomes.flatMap((o, i) => (i === 3 ? [] : [o]));
  t.ok(accepted.every((o) => o.status === 'fulfilled' && o.value.kind === 'accepted'), 'every good send is accepted');
  t.same(await counts(), { messages: 5, records: 5, jobs: 5, graphile: 5, events: 5 }, 'one message, record, job and Graphile job each');

  const replays = await Promise.all(inputs.filter((_, i) => i !== 3).map(submit));
  t.ok(replays.every((r) => r.kind === 'replayed'), 'replaying the keys');
  t.same(
    replays.map((r) => (r as { body: { jobId: string } }).body.jobId),
    accepted.map((o) => ((o as PromiseFulfilledResult<SendOutcome>).value as { body: { jobId: string } }).body.jobId),
    'answers the jobs first accepted',
  );
  t.same(await counts(), { messages: 5, records: 5, jobs: 5, graphile: 5, events: 5 }, 'and writes nothing');
  const bad = await submit(input('key-bad', 'now without the byte'));
  t.equal(bad.kind, 'accepted', 'the failed send spent no key');
});
