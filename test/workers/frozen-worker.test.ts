// A worker frozen (SIGSTOP) past its heartbeat while it runs a chat turn:
// the sweep gives the turn to another worker, and when the frozen one wakes
// and its stream ends, it must let the job go without touching it. Graphile
// Worker's completion deletes a job by id alone, so a stale attempt that
// "completed" deleted the job the other worker held, and the session's queue
// stayed locked: every later turn of the session waited for ever (found by
// npm run soak).
import t from 'tap';
import { z } from 'zod';
import { sql } from '../../core/db/pool.ts';
import { startTestServerWithFakeOpenAI } from '../helpers/app.ts';
import { createMember, withOwnOpenAIKey } from '../helpers/fixtures.ts';
import { waitFor, waitForOutput } from '../helpers/wait.ts';
import { spawnWorkerProcess, startTestWorker } from '../helpers/worker.ts';

const api = await startTestServerWithFakeOpenAI(t, 'sk-frozen-key-1234');
const { app, db, config, openai, databaseUrl, overrides } = api;
const member = await createMember(db, 'admin');
await withOwnOpenAIKey(db, config, member, 'sk-frozen-key-1234');
const headers = { authorization: `Bearer ${member.token}`, 'x-tenant-id': member.tenantId };

let keys = 0;
async function send(sessionId: string, message: string) {
  const res = await app.inject({
    method: 'POST',
    url: '/api/chat/send',
    headers: { ...headers, 'idempotency-key': `frozen-key-${++keys}` },
    payload: { sessionId, message },
  });
  if (res.statusCode !== 202) throw new Error(`send: ${res.statusCode} ${res.body}`);
  return (res.json() as { jobId: string }).jobId;
}
const status = (jobId: string) =>
  db.oneFirst(sql.type(z.object({ status: z.string() }))`select status from jobs where id = ${jobId}`);
const asked = () =>
  openai.requests.filter((r) => r.path.endsWith('/chat/completions')).map((r) => r.messages!.at(-1)!.content);
const gate = () => {
  let open!: () => void;
  const closed = new Promise<void>((resolve) => (open = resolve));
  return { closed, open };
};

for (const order of ['the frozen stream ends first', 'the taken-over turn answers first'] as const) {
  t.test(
    `a frozen worker that wakes after its turn was taken over lets the job go; the next turn runs (${order})`,
    async (t) => {
      const frozenAnswer = gate();
      const takenAnswer = gate();
      const before = asked().length;
      openai.enqueue(
        { reply: 'from the frozen worker', gate: frozenAnswer.closed },
        { reply: 'answer one', gate: takenAnswer.closed },
        { reply: 'answer two' },
      );
      const frozen = spawnWorkerProcess(t, databaseUrl, overrides);
      t.teardown(() => void frozen.child.kill('SIGCONT'));
      await waitForOutput(frozen, /worker started/);
      const sessionId = (
        await app.inject({
          method: 'POST',
          url: '/api/chat/sessions',
          headers,
          payload: { model: 'openai/gpt-4o-mini' },
        })
      ).json().id as string;
      const first = await send(sessionId, 'one');
      await waitFor('the turn to reach the provider', async () => asked().length === before + 1);

      frozen.child.kill('SIGSTOP');
      const taker = await startTestWorker(t, databaseUrl, overrides); // its sweep finds the frozen worker's heartbeat stale
      await waitFor('the other worker to take the turn over', async () => asked().length === before + 2, 60_000);

      if (order === 'the taken-over turn answers first') {
        // The frozen attempt then finds the answer written when it tries to write its own.
        takenAnswer.open();
        await waitFor('the taken-over turn to succeed', async () => (await status(first)) === 'succeeded');
      }
      frozen.child.kill('SIGCONT');
      frozenAnswer.open(); // the frozen worker's stream ends: its attempt is no longer the job's
      await waitForOutput(frozen, /job finished by another attempt/);
      takenAnswer.open();
      await waitFor('the taken-over turn to succeed', async () => (await status(first)) === 'succeeded');
      t.notMatch(frozen.output(), /Failed task|"level":50/, 'the frozen attempt fails nothing (it only lets go)');

      const second = await send(sessionId, 'two');
      await waitFor("the session's next turn to run", async () => (await status(second)) === 'succeeded');
      const answers = await db.anyFirst(sql.type(z.object({ content: z.string() }))`
      select content from chat_messages where session_id = ${sessionId} and role = 'assistant' order by seq`);
      t.same(
        answers,
        ['answer one', 'answer two'],
        'one answer per turn, in order; the frozen attempt recorded nothing',
      );
      t.equal(
        await db.oneFirst(
          sql.type(
            z.object({ n: z.number() }),
          )`select count(*)::int as n from graphile_worker.jobs where task_identifier = 'chat.turn'`,
        ),
        0,
        'no Graphile job left behind',
      );
      frozen.child.kill('SIGTERM');
      await frozen.exited;
      await taker.stop();
    },
  );
}
