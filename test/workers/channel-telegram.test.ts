// Telegram end to end against a local Bot API: link (getMe, setWebhook, the
// /start binding woken through link/wait), enable, inbound update -> chat
// turn on a real worker -> sendMessage exactly once: after a 429 with
// retry_after (the delivery waits parked until then, its worker slot free), and when the
// worker is SIGKILLed mid-delivery; a blocked bot marks the channel 'error';
// disconnect deletes the webhook; a link job cancelled mid-step ends at once.
import t from 'tap';
import { z } from 'zod';
import { sql } from '../../core/db/pool.ts';
import { startTestServer } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { createMember } from '../helpers/fixtures.ts';
import { startTelegramServer } from '../helpers/telegram-server.ts';
import { waitFor, waitForOutput } from '../helpers/wait.ts';
import { spawnWorkerProcess, startTestWorker } from '../helpers/worker.ts';
import { wakeJob } from '../../core/jobs/lifecycle.ts';

const top = t;
const tg = await startTelegramServer(t);
const databaseUrl = await createTestDatabase(t);
const overrides = { TELEGRAM_API_BASE: tg.url };
const api = await startTestServer(t, databaseUrl, overrides);
const { app, db } = api;
const member = await createMember(db, 'admin');
const headers = { authorization: `Bearer ${member.token}`, 'x-tenant-id': member.tenantId };
const CHAT = 4242;
const worker = spawnWorkerProcess(t, databaseUrl, overrides);
await waitForOutput(worker, /worker started/);

const job = (kind: string) =>
  db.maybeOne(sql.type(z.object({ id: z.string(), status: z.string(), attempts: z.number(), error: z.unknown() }))`
  select id, status, attempts, error from jobs where tenant_id = ${member.tenantId} and kind = ${kind} order by created_at desc limit 1`);
const answerOf = (turnJobId: string) =>
  db.oneFirst(
    sql.type(z.object({ content: z.string() }))`select content from chat_messages where job_id = ${turnJobId}`,
  );
const sendCalls = () => tg.state.calls.filter((c) => c === 'sendMessage').length;
async function say(text: string) {
  const res = await tg.deliver(tg.message(CHAT, text));
  t.equal(res.status, 200);
  return (await res.json()) as { status: string; jobId: string };
}

t.test('link: getMe + setWebhook, the /start message binds the chat and wakes link/wait', async (t) => {
  const saved = await app.inject({
    method: 'POST',
    url: '/api/channels/telegram/config',
    headers,
    payload: { botToken: tg.bot.token, botUsername: tg.bot.username },
  });
  t.notMatch(saved.body, tg.bot.token.split(':')[1]!, 'the token is never returned');
  const started = (await app.inject({ method: 'POST', url: '/api/channels/telegram/link', headers })).json();
  t.match(started.linkUrl, new RegExp(`^https://t\\.me/${tg.bot.username}\\?start=[\\w-]{16,64}$`));
  await waitFor('setWebhook', async () => tg.state.webhook);
  t.match(tg.state.webhook!.url, /\/api\/channels\/telegram\/inbound\/[0-9a-f-]{36}$/);
  tg.state.webhook!.url = tg.state.webhook!.url.replace(api.config.baseUrl, api.url); // BASE_URL is not where the test server listens
  const waiting = fetch(`${api.url}/api/channels/telegram/link/wait?timeout=30`, { headers }).then((r) => r.json());
  await waitFor('the waiter', async () => app.channelWaiters.size() === 1);
  const code = new URL(started.linkUrl).searchParams.get('start')!;
  t.match(await say(`/start ${code}`), { status: 'bound' });
  t.match(await waiting, { status: 'linked', changed: true });
  const linkJob = await waitFor('the link job', async () =>
    (await job('channel.link'))?.status === 'succeeded' ? job('channel.link') : null,
  );
  t.ok(linkJob);
  t.match((await app.inject({ url: '/api/channels/telegram/status', headers })).json(), {
    status: 'linked',
    account: { chatId: String(CHAT), botUsername: tg.bot.username },
  });
  t.equal(
    (await app.inject({ method: 'POST', url: '/api/channels/telegram/enable', headers })).json().status,
    'enabled',
  );
});

t.test('signatures: a wrong or missing secret token is refused', async (t) => {
  t.equal((await tg.deliver(tg.message(CHAT, 'x'), 'not-the-secret')).status, 401);
  t.equal((await tg.deliver(tg.message(CHAT, 'x'), null)).status, 401);
});

t.test('a 429 with retry_after: the reply is sent once, after the wait', async (t) => {
  tg.state.sendScript.push({
    status: 429,
    body: {
      ok: false,
      error_code: 429,
      description: 'Too Many Requests: retry after 1',
      parameters: { retry_after: 1 },
    },
  });
  const before = sendCalls();
  const { status, jobId } = await say('Hello bot');
  t.equal(status, 'turn');
  await waitFor('the reply', async () => tg.state.sent.length === 1);
  t.same(tg.state.sent[0], { chatId: String(CHAT), text: await answerOf(jobId) });
  t.equal(sendCalls() - before, 2, 'refused once, then sent');
});

t.test('a retry_after of 120 s: the delivery waits until then, its slot free, then is sent once', async (t) => {
  tg.state.sendScript.push({
    status: 429,
    body: {
      ok: false,
      error_code: 429,
      description: 'Too Many Requests: retry after 120',
      parameters: { retry_after: 120 },
    },
  });
  const sentBefore = tg.state.sent.length;
  const { jobId } = await say('Later is fine');
  const delivery = await waitFor('the refused attempt', async () => {
    const j = await job('channel.deliver');
    return j && (j.error as { retrying?: boolean } | null)?.retrying === true ? j : null;
  });
  const retryAt = new Date((delivery.error as { retryAt: string }).retryAt).getTime();
  t.ok(
    retryAt - Date.now() > 100_000 && retryAt - Date.now() <= 121_000,
    `the job says when: in about 120 s (${Math.round((retryAt - Date.now()) / 1000)} s)`,
  );
  // Its channel's queue wakes then (the wake-up keyed by its queue), held by no worker meanwhile.
  const wake = await db.one(sql.type(z.object({ by: z.string().nullable(), s: z.number() }))`
    select g.locked_by as by, extract(epoch from g.run_at - now())::float8 as s
    from jobs j join graphile_worker.jobs g on g.key = 'q:' || j.queue_name where j.id = ${delivery.id}`);
  t.equal(wake.by, null, 'waiting: no worker holds it');
  t.ok(wake.s > 100 && wake.s <= 121, `until then, not after the backoff (${Math.round(wake.s)} s)`);
  // The test does not wait two minutes: the wait ends now.
  await wakeJob(db, delivery.id, 'now');
  await waitFor('the reply', async () => tg.state.sent.length === sentBefore + 1, 20_000);
  t.same(tg.state.sent.at(-1), { chatId: String(CHAT), text: await answerOf(jobId) });
});

t.test('the worker is SIGKILLed mid-delivery: the reply arrives exactly once', async (t) => {
  let release!: () => void;
  tg.state.sendScript.push({
    hold: new Promise<void>((r) => (release = r)),
    body: { ok: true, result: { message_id: 999 } },
  });
  const before = sendCalls();
  const sentBefore = tg.state.sent.length;
  const { jobId } = await say('Are you there?');
  await waitFor('the held sendMessage', async () => sendCalls() > before);
  worker.child.kill('SIGKILL');
  await worker.exited;
  release(); // the killed worker never reads this answer: Telegram did not deliver it
  await startTestWorker(top, databaseUrl, overrides); // for the rest of the file; sweeps the dead worker's job and retries it
  await waitFor('the reply after the crash', async () => tg.state.sent.length === sentBefore + 1, 30_000);
  t.same(tg.state.sent.at(-1), { chatId: String(CHAT), text: await answerOf(jobId) });
  await waitFor('the delivery job', async () => (await job('channel.deliver'))?.status === 'succeeded');
  t.equal(tg.state.sent.length, sentBefore + 1, 'once');
});

t.test('a blocked bot marks the channel error and stops retrying', async (t) => {
  tg.state.sendScript.push({
    status: 403,
    body: { ok: false, error_code: 403, description: 'Forbidden: bot was blocked by the user' },
  });
  await say('Still there?');
  const failed = await waitFor('the failed delivery', async () => {
    const j = await job('channel.deliver');
    return j?.status === 'failed' ? j : null;
  });
  t.match(failed, { attempts: 1, error: { code: 'channel_refused' } });
  t.match((await app.inject({ url: '/api/channels/telegram/status', headers })).json(), {
    status: 'error',
    lastError: /blocked/,
  });
});

t.test('disconnect: deleteWebhook in a job, the inbound URL refused at once', async (t) => {
  const res = await app.inject({ method: 'POST', url: '/api/channels/telegram/disconnect', headers });
  t.equal(res.statusCode, 202);
  t.equal((await tg.deliver(tg.message(CHAT, 'hi'))).status, 404);
  await waitFor('deleteWebhook', async () => tg.state.webhook === null);
  t.match((await app.inject({ url: `/api/channels/telegram/jobs/${res.json().jobId}`, headers })).json(), {
    kind: 'channel.disconnect',
  });
});

t.test("cancelling a link job mid-step: cancelled at once, not_linked, the step's late writes refused", async (t) => {
  await app.inject({
    method: 'POST',
    url: '/api/channels/telegram/config',
    headers,
    payload: { botToken: tg.bot.token, botUsername: tg.bot.username },
  });
  let release!: () => void;
  tg.state.setWebhookHold = new Promise<void>((r) => (release = r));
  const { jobId } = (await app.inject({ method: 'POST', url: '/api/channels/telegram/link', headers })).json();
  await waitFor(
    'the register step running',
    async () => (await job('channel.link'))?.status === 'running' && tg.state.webhook !== null,
  );
  const cancelled = await app.inject({ method: 'POST', url: `/api/jobs/${jobId}/cancel`, headers });
  t.equal(cancelled.statusCode, 200, cancelled.body);
  t.equal(cancelled.json().status, 'cancelled', 'not left cancelling');
  t.equal((await app.inject({ url: '/api/channels/telegram/status', headers })).json().status, 'not_linked');
  release();
  await waitFor(
    'the step to end',
    async () =>
      (await db.oneFirst(sql.type(z.object({ n: z.number() }))`
    select count(*)::int as n from graphile_worker._private_jobs where payload->>'jobId' = ${jobId}`)) === 0,
  );
  t.match(await job('channel.link'), { id: jobId, status: 'cancelled' });
  t.match((await app.inject({ url: '/api/channels/telegram/status', headers })).json(), { status: 'not_linked' });
});
