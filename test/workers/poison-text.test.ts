// A model answer holding what PostgreSQL's text and jsonb refuse (a NUL, a
// lone surrogate), streamed by a real local OpenAI-compatible server (and an
// Anthropic one) as raw JSON escapes: the chat turn and the company run end
// succeeded with the answer made storable, the provider is called once (not
// again at every retry), and the session's next turn runs.
import t from 'tap';
import { z } from 'zod';
import { Keyring } from '../../core/crypto/keyring.ts';
import { sql } from '../../core/db/pool.ts';
import { putKey } from '../../core/provider-keys/keys.ts';
import { buildTestApp } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { startFakeAnthropic, startFakeOpenAI, type FakeProvider } from '../helpers/fake-providers.ts';
import { createMember, withOwnOpenAIKey } from '../helpers/fixtures.ts';
import { waitFor } from '../helpers/wait.ts';
import { startTestWorker } from '../helpers/worker.ts';

const KEY = 'sk-poison-key-1234';
const MODEL = 'openai/gpt-4o-mini';
const openai = await startFakeOpenAI({ apiKey: KEY });
const anthropic = await startFakeAnthropic({ apiKey: KEY });
t.teardown(() => Promise.all([openai.close(), anthropic.close()]));
const databaseUrl = await createTestDatabase(t);
const overrides = { OPENAI_BASE_URL: openai.url, ANTHROPIC_BASE_URL: anthropic.url };
const { app, db, config } = await buildTestApp(t, databaseUrl, overrides);
await startTestWorker(t, databaseUrl, overrides);
const member = await createMember(db, 'admin');
await withOwnOpenAIKey(db, config, member, KEY);
await putKey(db, Keyring.fromConfig(config), {
  tenantId: member.tenantId,
  provider: 'anthropic',
  apiKey: KEY,
  userId: member.userId,
});
const headers = { authorization: `Bearer ${member.token}`, 'x-tenant-id': member.tenantId };

const POISONS = [
  { name: 'NUL', reply: 'before\u0000after', stored: 'beforeafter' },
  { name: 'lone surrogate', reply: 'half \ud800 pair', stored: 'half \ufffd pair' },
];

type Job = { status: string; attempts: number; result: Record<string, unknown> | null; error: unknown };

/** The job once it is final, or once it waits for a retry (the failure this test is about). */
const settled = (jobId: string) =>
  waitFor(`job ${jobId} to end or to wait for a retry`, async () => {
    const job = (await app.inject({ url: `/api/jobs/${jobId}`, headers })).json() as Job & {
      error: { retrying?: boolean } | null;
    };
    return ['succeeded', 'failed', 'cancelled'].includes(job.status) || job.error?.retrying ? job : null;
  });

/** Completion requests the provider got whose last message was `content`. */
const calls = (content: string, provider: FakeProvider = openai) =>
  provider.requests.filter(
    (r) => ['/v1/chat/completions', '/v1/messages'].includes(r.path) && r.messages?.at(-1)?.content === content,
  ).length;

let sends = 0;
const send = async (sessionId: string, message: string) => {
  const sent = await app.inject({
    method: 'POST',
    url: '/api/chat/send',
    headers: { ...headers, 'idempotency-key': `poison-${++sends}` },
    payload: { sessionId, message },
  });
  t.equal(sent.statusCode, 202, sent.body);
  return sent.json().jobId as string;
};

const TURNS = [
  ...POISONS.map((poison) => ({ ...poison, model: MODEL, provider: openai })),
  {
    name: 'NUL and a lone surrogate, from Anthropic',
    reply: 'before\u0000after half \ud800 pair',
    stored: 'beforeafter half \ufffd pair',
    model: 'anthropic/claude-3-5-haiku-latest',
    provider: anthropic,
  },
];

for (const poison of TURNS) {
  t.test(`a chat turn whose answer holds a ${poison.name}`, async (t) => {
    const session = await app.inject({
      method: 'POST',
      url: '/api/chat/sessions',
      headers,
      payload: { model: poison.model },
    });
    const sessionId = session.json().id as string;
    poison.provider.enqueue({ reply: poison.reply, chunks: 2 });
    const first = `poisoned ${poison.name}`;
    const next = `after the ${poison.name}`;
    const turn = await send(sessionId, first);
    const nextTurn = await send(sessionId, next); // queued behind it in the session's queue

    const job = await settled(turn);
    t.match(job, { status: 'succeeded', attempts: 1, error: null }, 'the turn ends at its first attempt');
    t.equal(job.result?.text, poison.stored, 'its answer, made storable');
    t.equal(calls(first, poison.provider), 1, 'the provider was called once');
    const messages = (await app.inject({ url: `/api/chat/messages?sessionId=${sessionId}`, headers })).json();
    t.ok(
      messages.items.some(
        (m: { role: string; content: string }) => m.role === 'assistant' && m.content === poison.stored,
      ),
      'the answer is readable in the session',
    );

    // (Its history holds both messages: the answer came after the second one.)
    t.match(
      await settled(nextTurn),
      { status: 'succeeded', result: { text: /^echo: [\s\S]*after the/ } },
      'the next turn runs',
    );
  });
}

for (const poison of POISONS) {
  t.test(`a company run whose output holds a ${poison.name}`, async (t) => {
    const call = (method: 'POST', url: string, payload?: object) =>
      app.inject({ method, url, headers, ...(payload ? { payload } : {}) });
    const company = (await call('POST', '/api/companies', { name: `Poison ${poison.name}` })).json();
    const base = `/api/companies/${company.id}`;
    const agent = (await call('POST', `${base}/agents`, { name: 'Writer', model: MODEL })).json();
    t.equal(agent.model, MODEL);
    const title = `Write the ${poison.name} memo`;
    const task = (await call('POST', `${base}/tasks`, { title })).json();
    openai.enqueue({ reply: poison.reply, chunks: 2 });
    const started = await call('POST', `${base}/tasks/${task.id}/runs`, { agentId: agent.id });
    t.equal(started.statusCode, 202, started.body);
    const { run, job } = started.json();

    t.match(await settled(job.id), { status: 'succeeded', attempts: 1, result: { output: poison.stored } });
    t.equal(calls(title), 1, 'the provider was called once');
    const stored = await db.one(
      sql.type(z.object({ status: z.string(), output: z.string().nullable() }))`
        select status, output from company_runs where id = ${run.id}`,
    );
    t.same(stored, { status: 'succeeded', output: poison.stored }, 'the run holds the output, made storable');

    const again = (await call('POST', `${base}/tasks/${task.id}/runs`, { agentId: agent.id })).json();
    t.match(
      await settled(again.job.id),
      { status: 'succeeded', result: { output: `echo: ${title}` } },
      'the next run runs',
    );
  });
}
