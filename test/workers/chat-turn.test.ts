// Chat turns end to end on a real worker against a local server that speaks
// the OpenAI protocol: streaming progress, retries, failures, crash recovery.
import t from 'tap';
import { z } from 'zod';
import { Keyring } from '../../core/crypto/keyring.ts';
import { sql } from '../../core/db/pool.ts';
import { putKey } from '../../core/provider-keys/keys.ts';
import { startTestServerWithFakeOpenAI } from '../helpers/app.ts';
import { createMember, withOwnOpenAIKey } from '../helpers/fixtures.ts';
import { waitFor } from '../helpers/wait.ts';
import { spawnWorkerProcess, startTestWorker } from '../helpers/worker.ts';
import { TestSocket } from '../helpers/ws.ts';

const api = await startTestServerWithFakeOpenAI(t, 'sk-tenant-key-1234');
const { app, db, config, openai, databaseUrl, overrides } = api;
const member = await createMember(db, 'admin');
await withOwnOpenAIKey(db, config, member, 'sk-tenant-key-1234');
const headers = { authorization: `Bearer ${member.token}`, 'x-tenant-id': member.tenantId };

let keySeq = 0;
async function newSession(model = 'openai/gpt-4o-mini') {
  return (
    await app.inject({ method: 'POST', url: '/api/chat/sessions', headers, payload: { title: 'T', model } })
  ).json().id as string;
}
async function send(sessionId: string, message: string) {
  const res = await app.inject({
    method: 'POST',
    url: '/api/chat/send',
    headers: { ...headers, 'idempotency-key': `turn-key-${++keySeq}-${Date.now()}` },
    payload: { sessionId, message },
  });
  t.equal(res.statusCode, 202);
  return res.json() as { jobId: string; messageId: string };
}
const JobRow = z.object({ status: z.string(), attempts: z.number(), result: z.unknown(), error: z.unknown() });
const finalJob = (jobId: string, timeoutMs = 30_000) =>
  waitFor(
    `job ${jobId} to finish`,
    async () => {
      const row = await db.one(sql.type(JobRow)`select status, attempts, result, error from jobs where id = ${jobId}`);
      return ['succeeded', 'failed'].includes(row.status) ? row : null;
    },
    timeoutMs,
  );
const assistantMessages = (sessionId: string) =>
  db.any(sql.type(z.object({ content: z.string(), job_id: z.string().nullable() }))`
    select content, job_id from chat_messages where session_id = ${sessionId} and role = 'assistant' order by seq`);
const usageOf = (jobId: string) =>
  db.any(sql.type(
    z.object({ input_tokens: z.number(), output_tokens: z.number(), model: z.string(), credential: z.string() }),
  )`
    select input_tokens, output_tokens, model, credential from usage_records where job_id = ${jobId}`);

t.test(
  'send -> worker -> streamed deltas over the websocket -> final state with the whole answer -> messages',
  async (t) => {
    await startTestWorker(t, databaseUrl, overrides);
    const sessionId = await newSession();
    const socket = await TestSocket.connect(api.wsUrl, member.token);
    t.teardown(() => socket.close());
    openai.enqueue({ reply: 'one two three four five six', chunks: 6, delayMs: 70 });
    const { jobId, messageId } = await send(sessionId, 'Count to six');
    socket.send({ type: 'subscribe', jobId });
    // Everything about the job, in the order it came: job states and deltas.
    const seen: Array<{
      type: string;
      job?: { status: string; result: { assistantMessageId?: string; text?: string } | null };
      deltas?: Array<{ jobId: string; offset: number; text: string; attempt: number }>;
    }> = [];
    const ofJob = (m: { type: string; job?: unknown; deltas?: unknown }) =>
      (m.type === 'job' && (m.job as { id: string }).id === jobId) ||
      (m.type === 'deltas' && (m.deltas as Array<{ jobId: string }>).some((d) => d.jobId === jobId));
    while (!['succeeded', 'failed'].includes(seen.filter((m) => m.type === 'job').at(-1)?.job?.status ?? ''))
      seen.push((await socket.next(ofJob, 20_000)) as never);
    const final = seen.at(-1)!.job!;
    t.equal(final.status, 'succeeded', 'the final state comes last');
    const deltas = seen.flatMap((m) => m.deltas ?? []).filter((d) => d.jobId === jobId);
    t.ok(
      deltas.length >= 2,
      `the answer streamed in pieces before the end (${deltas.length} deltas; a late subscriber first gets the text so far)`,
    );
    let text = '';
    for (const d of deltas) {
      t.equal(d.offset, text.length, 'each delta continues where the last one ended');
      text += d.text;
    }
    t.equal(text, 'one two three four five six', 'the deltas put together are the answer');
    t.equal(final.result!.text, 'one two three four five six', 'and the final state carries it whole');
    t.equal((final as { progress?: unknown }).progress ?? null, null, 'with no partial text beside it');
    // Deltas are not row writes: queued, running and the result, plus the
    // progress checkpoints the turn's own duration allows (the first at 1 s at
    // the earliest, each later one twice as far; a loaded machine makes more).
    const row = await db.one(sql.type(z.object({ v: z.number(), ms: z.number() }))`
    select version as v, extract(epoch from finished_at - started_at)::float8 * 1000 as ms from jobs where id = ${jobId}`);
    const checkpoints = row.ms < 1_000 ? 0 : Math.floor(Math.log2(row.ms / 1_000)) + 1;
    t.ok(
      row.v <= 3 + checkpoints,
      `a stream of ${deltas.length} deltas wrote its job row ${row.v} times in ${Math.round(row.ms)} ms (queued, running, result, ${checkpoints} checkpoints allowed)`,
    );

    const messages = (await app.inject({ url: `/api/chat/messages?sessionId=${sessionId}`, headers })).json().items;
    t.same(
      messages.map((m: { role: string }) => m.role),
      ['user', 'assistant'],
    );
    t.equal(messages[0].id, messageId);
    t.equal(messages[1].content, 'one two three four five six');
    t.equal(messages[1].id, final.result!.assistantMessageId, 'the job result names the assistant message');
    const touched = await db.oneFirst(sql.type(z.object({ ok: z.boolean() }))`
    select updated_at >= (select created_at from chat_messages where id = ${messages[1].id}) as ok from chat_sessions where id = ${sessionId}`);
    t.ok(touched, 'the answer touched its session (recent sessions list first)');
    const polled = await app.inject({ url: `/api/chat/jobs/${jobId}`, headers });
    t.same(polled.json(), final, 'polling returns the same final JSON');
    t.match(await usageOf(jobId), [{ model: 'openai/gpt-4o-mini', credential: 'tenant_key' }]);
    t.equal(openai.requests.at(-1)?.apiKey, 'sk-tenant-key-1234', "the tenant's own key was used");
  },
);

t.test('provider errors: 429 then success, invalid key, stream cut mid-way', async (t) => {
  await startTestWorker(t, databaseUrl, overrides);
  const s1 = await newSession();
  openai.enqueue({ status: 429, retryAfter: 1 }, { reply: 'after the rate limit' });
  const rateLimited = await send(s1, 'hello');
  const r1 = await finalJob(rateLimited.jobId);
  t.match(r1, { status: 'succeeded', attempts: 2 });
  t.same(
    (await assistantMessages(s1)).map((m) => m.content),
    ['after the rate limit'],
    'one message',
  );

  const s2 = await newSession();
  openai.enqueue({ cutAfterChunks: 2, reply: 'partial answer that breaks' }, { reply: 'whole answer' });
  const cut = await send(s2, 'hello');
  t.match(await finalJob(cut.jobId), { status: 'succeeded', attempts: 2 });
  t.same(
    (await assistantMessages(s2)).map((m) => m.content),
    ['whole answer'],
    'no partial duplicate',
  );
  t.equal((await usageOf(cut.jobId)).length, 1, 'one usage record');

  const s3 = await newSession();
  openai.enqueue({ status: 401, message: 'bad key' });
  const refused = await send(s3, 'hello');
  const r3 = await finalJob(refused.jobId);
  t.match(r3, { status: 'failed', attempts: 1, error: { code: 'provider_invalid_key', retrying: false } });
  t.same(await assistantMessages(s3), [], 'no message for a failed turn');
});

t.test('a model the plan does not allow fails with model_not_allowed', async (t) => {
  await startTestWorker(t, databaseUrl, overrides);
  const other = await createMember(db, 'admin'); // free plan: builtin only
  const h = { authorization: `Bearer ${other.token}`, 'x-tenant-id': other.tenantId };
  const sessionId = (
    await app.inject({ method: 'POST', url: '/api/chat/sessions', headers: h, payload: { model: 'openai/gpt-4o' } })
  ).json().id;
  // Its own key, so nothing refuses the send and the plan decides in the worker.
  await putKey(db, Keyring.fromConfig(config), {
    tenantId: other.tenantId,
    provider: 'openai',
    apiKey: 'sk-tenant-key-1234',
    userId: other.userId,
  });
  const res = await app.inject({
    method: 'POST',
    url: '/api/chat/send',
    headers: { ...h, 'idempotency-key': 'plan-key-0001' },
    payload: { sessionId, message: 'hi' },
  });
  t.equal(res.statusCode, 202);
  t.match(await finalJob(res.json().jobId), { status: 'failed', error: { code: 'model_not_allowed' } });
});

t.test('the built-in offline model answers with no key at all', async (t) => {
  await startTestWorker(t, databaseUrl, overrides);
  const fresh = await createMember(db, 'admin');
  const h = { authorization: `Bearer ${fresh.token}`, 'x-tenant-id': fresh.tenantId };
  const sessionId = (await app.inject({ method: 'POST', url: '/api/chat/sessions', headers: h, payload: {} })).json()
    .id;
  const res = await app.inject({
    method: 'POST',
    url: '/api/chat/send',
    headers: { ...h, 'idempotency-key': 'offline-key-1' },
    payload: { sessionId, message: 'Hello offline' },
  });
  t.match(await finalJob(res.json().jobId), { status: 'succeeded' });
  const [answer] = await assistantMessages(sessionId);
  t.ok(answer && answer.content.length > 0, 'an answer');
  t.match(await usageOf(res.json().jobId), [{ model: 'builtin/offline', credential: 'none' }]);
});

t.test('a worker killed during a turn: after recovery one message and one usage record', async (t) => {
  const sessionId = await newSession();
  openai.enqueue({ reply: 'slow answer in many pieces', chunks: 5, delayMs: 800 }, { reply: 'answer after recovery' });
  const doomed = spawnWorkerProcess(t, databaseUrl, { ...overrides, WORKER_CONCURRENCY: '1' });
  const asked = openai.requests.length;
  const { jobId } = await send(sessionId, 'take your time');
  // Kill it once it is talking to the model, mid-stream.
  await waitFor('the turn to reach the model', async () => openai.requests.length > asked, 30_000);
  doomed.child.kill('SIGKILL');
  await doomed.exited;
  await startTestWorker(t, databaseUrl, overrides);
  t.match(await finalJob(jobId, 60_000), { status: 'succeeded', attempts: 2 });
  t.same(
    (await assistantMessages(sessionId)).map((m) => m.content),
    ['answer after recovery'],
  );
  t.equal((await usageOf(jobId)).length, 1);
});
