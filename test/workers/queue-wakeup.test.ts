// A job that waits behind another job of its named queue (a chat session's
// next turn) runs as soon as the one before it is let go, not at the next
// poll. Graphile Worker skips a locked queue when it fetches and says nothing
// when the queue unlocks; migration 0034 announces the unlock the way new
// jobs are announced. The poll interval here is ten minutes, so a turn that
// waited for a poll would time out the test.
import t from 'tap';
import { z } from 'zod';
import { sql } from '../../core/db/pool.ts';
import { startTestServerWithFakeOpenAI } from '../helpers/app.ts';
import { createMember, withOwnOpenAIKey } from '../helpers/fixtures.ts';
import { waitFor } from '../helpers/wait.ts';
import { startTestWorker } from '../helpers/worker.ts';

const api = await startTestServerWithFakeOpenAI(t, 'sk-wakeup-key-1234');
const { app, db, config, openai, databaseUrl, overrides } = api;
const member = await createMember(db, 'admin');
await withOwnOpenAIKey(db, config, member, 'sk-wakeup-key-1234');
const headers = { authorization: `Bearer ${member.token}`, 'x-tenant-id': member.tenantId };
const NEVER_POLL = { WORKER_POLL_INTERVAL_MS: '600000' };

const Job = z.object({ status: z.string(), started: z.boolean() });
const jobState = (jobId: string) =>
  db.one(sql.type(Job)`select status, started_at is not null as started from jobs where id = ${jobId}`);

let keys = 0;
async function send(sessionId: string, message: string) {
  const res = await app.inject({
    method: 'POST',
    url: '/api/chat/send',
    headers: { ...headers, 'idempotency-key': `wakeup-${++keys}` },
    payload: { sessionId, message },
  });
  t.equal(res.statusCode, 202, res.body);
  return (res.json() as { jobId: string }).jobId;
}

for (const [mode, settings] of [
  ['an I/O pool of 4 slots', { WORKER_IO_CONCURRENCY: '4' }],
  ['an I/O pool of 1,000 slots', { WORKER_IO_CONCURRENCY: '1000' }],
] as const) {
  t.test(`${mode}: a turn sent while its session's turn runs starts when that one ends`, async (t) => {
    await startTestWorker(t, databaseUrl, { ...overrides, ...NEVER_POLL, ...settings });
    const sessionId = (
      await app.inject({
        method: 'POST',
        url: '/api/chat/sessions',
        headers,
        payload: { title: 'Wake-up', model: 'openai/gpt-4o-mini' },
      })
    ).json().id as string;
    openai.enqueue(
      { reply: 'first answer', chunks: 3, delayMs: 150 },
      { reply: 'second answer' },
      { reply: 'third answer' },
    );
    const first = await send(sessionId, 'first');
    await waitFor('the first turn to start', async () => (await jobState(first)).started);
    // Fetched now, both find their queue locked by the first turn.
    const second = await send(sessionId, 'second');
    const third = await send(sessionId, 'third');
    t.equal((await jobState(second)).status, 'queued', 'the second turn waits behind the first');
    for (const jobId of [first, second, third]) {
      await waitFor(
        `turn ${jobId} to succeed without a poll`,
        async () => (await jobState(jobId)).status === 'succeeded',
        20_000,
      );
    }
    const answers = await db.anyFirst(sql.type(z.object({ content: z.string() }))`
      select content from chat_messages where session_id = ${sessionId} and role = 'assistant' order by seq`);
    t.same(answers, ['first answer', 'second answer', 'third answer'], 'in order');
  });
}
