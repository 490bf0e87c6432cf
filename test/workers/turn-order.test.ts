// Turns of a session are answered in the order they were sent: also when the
// first turn fails and waits for its retry (it waits parked and keeps its
// session's queue, so the second cannot overtake it), and when the worker
// running the first turn is SIGKILLed (the sweep gives both back, and the
// first, earlier in the fair order, is fetched first).
import t from 'tap';
import { z } from 'zod';
import { sql } from '../../core/db/pool.ts';
import { startTestServerWithFakeOpenAI } from '../helpers/app.ts';
import { createMember, withOwnOpenAIKey } from '../helpers/fixtures.ts';
import { waitFor, waitForOutput } from '../helpers/wait.ts';
import { spawnWorkerProcess, startTestWorker } from '../helpers/worker.ts';
import { startWorker } from '../../workers/worker.ts';
import { pino } from 'pino';
import { testConfig } from '../helpers/config.ts';
import { captureLog } from '../helpers/log-capture.ts';
import { startTcpProxy } from '../api/routes/ws/tcp-proxy.ts';

const api = await startTestServerWithFakeOpenAI(t, 'sk-order-key-1234');
const { app, db, config, openai, databaseUrl, overrides } = api;
const member = await createMember(db, 'admin');
await withOwnOpenAIKey(db, config, member, 'sk-order-key-1234');
const headers = { authorization: `Bearer ${member.token}`, 'x-tenant-id': member.tenantId };

let keys = 0;
const newSession = async () =>
  (
    await app.inject({ method: 'POST', url: '/api/chat/sessions', headers, payload: { model: 'openai/gpt-4o-mini' } })
  ).json().id as string;
async function send(sessionId: string, message: string) {
  const res = await app.inject({
    method: 'POST',
    url: '/api/chat/send',
    headers: { ...headers, 'idempotency-key': `order-key-${++keys}` },
    payload: { sessionId, message },
  });
  if (res.statusCode !== 202) throw new Error(`send: ${res.statusCode} ${res.body}`);
  return (res.json() as { jobId: string }).jobId;
}
const Timing = z.object({
  status: z.string(),
  attempts: z.number(),
  started_at: z.string().nullable(),
  finished_at: z.string().nullable(),
});
const timing = (jobId: string) =>
  db.one(sql.type(Timing)`select status, attempts, started_at, finished_at from jobs where id = ${jobId}`);
const answers = (sessionId: string) =>
  db.anyFirst(sql.type(z.object({ content: z.string() }))`
  select content from chat_messages where session_id = ${sessionId} and role = 'assistant' order by seq`);
/** Which user message each model request answered, in the order the provider saw them. */
const asked = () =>
  openai.requests.filter((r) => r.path.endsWith('/chat/completions')).map((r) => r.messages!.at(-1)!.content);

t.test('a first turn that fails and waits for its retry is still answered first', async (t) => {
  await startTestWorker(t, databaseUrl, overrides);
  openai.requests.length = 0;
  openai.enqueue({ status: 429, retryAfter: 1 }, { reply: 'answer one' }, { reply: 'answer two' });
  const sessionId = await newSession();
  const first = await send(sessionId, 'one');
  await waitFor(
    'the first attempt to fail',
    async () => (await timing(first)).attempts === 1 && (await timing(first)).status === 'queued',
  );
  const second = await send(sessionId, 'two');
  await waitFor('both turns', async () => (await timing(second)).status === 'succeeded', 30_000);
  t.same(asked(), ['one', 'one', 'two'], 'the provider saw the first turn twice, then the second');
  t.same(await answers(sessionId), ['answer one', 'answer two'], 'answers in the order sent');
  const [a, b] = [await timing(first), await timing(second)];
  t.equal(a.attempts, 2);
  t.ok(b.started_at! >= a.finished_at!, 'the second turn started after the first was answered');
});

t.test("the first turn's worker is SIGKILLed mid-turn: both are answered, in order", async (t) => {
  openai.requests.length = 0;
  openai.enqueue({ reply: 'lost', hang: true, afterChunks: 1 });
  const doomed = spawnWorkerProcess(t, databaseUrl, { ...overrides, LOG_LEVEL: 'info' });
  await waitForOutput(doomed, /worker started/);
  const sessionId = await newSession();
  const first = await send(sessionId, 'first');
  await waitFor('the first turn to reach the provider', async () => asked().includes('first'));
  const second = await send(sessionId, 'second');
  doomed.child.kill('SIGKILL');
  await doomed.exited;
  openai.enqueue({ reply: 'answer first' }, { reply: 'answer second' });
  await startTestWorker(t, databaseUrl, overrides); // its dead-worker sweep gives the turns back
  await waitFor('both turns', async () => (await timing(second)).status === 'succeeded', 60_000);
  t.same(asked(), ['first', 'first', 'second'], 'the first turn ran again before the second ran at all');
  t.same(await answers(sessionId), ['answer first', 'answer second']);
  t.ok(
    (await timing(second)).started_at! >= (await timing(first)).finished_at!,
    'the second started after the first was answered',
  );
});

t.test(
  'a first turn that fails while PostgreSQL is away keeps its place: the second does not overtake it',
  async (t) => {
    // The worker reaches PostgreSQL through a proxy the test cuts; the api and the test do not.
    const proxy = await startTcpProxy(databaseUrl);
    const log = captureLog();
    const worker = await startWorker({
      config: testConfig(proxy.url, overrides),
      databaseUrl: proxy.url,
      logger: pino({ level: 'warn' }, log.stream),
    });
    t.teardown(async () => {
      await worker.stop().catch((error: Error) => t.comment(`worker stop after the outage: ${error.message}`));
      await proxy.close();
    });
    openai.requests.length = 0;
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    openai.enqueue(
      { reply: 'lost half-way', gate, cutAfterChunks: 1 },
      { reply: 'answer one' },
      { reply: 'answer two' },
    );
    const sessionId = await newSession();
    const first = await send(sessionId, 'one');
    await waitFor('the first turn to reach the provider', async () => asked().includes('one'));
    await proxy.cut();
    release(); // the stream breaks: the attempt fails while its worker cannot reach PostgreSQL
    const second = await send(sessionId, 'two');
    // The attempt has failed and its worker is trying to record that (or, before
    // the fix, had handed the failure to Graphile).
    await waitFor('the failed attempt to meet the outage', async () =>
      /while starting or ending the attempt|Failed task/.test(log.text()),
    );
    await proxy.restore();
    await waitFor(
      'both turns',
      async () => (await timing(second)).status === 'succeeded' && (await timing(first)).status === 'succeeded',
      60_000,
    );
    t.same(asked(), ['one', 'one', 'two'], 'the first turn ran again before the second ran at all');
    t.same(await answers(sessionId), ['answer one', 'answer two'], 'answers in the order sent');
  },
);
