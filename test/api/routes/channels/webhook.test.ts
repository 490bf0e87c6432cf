// The webhook channel end to end on a real worker: settings, link with a
// session token, link/wait (timeout, 200 waiters woken by one link, a dropped
// client), signed inbound -> chat turn -> signed reply, signature refusals,
// quota refusals answered to the channel, roles and tenant isolation.
import http from 'node:http';
import t from 'tap';
import { z } from 'zod';
import { signWebhook } from '../../../../core/channels/webhook.ts';
import { sql } from '../../../../core/db/pool.ts';
import { startTestServer } from '../../../helpers/app.ts';
import { createTestDatabase } from '../../../helpers/db.ts';
import { createMember } from '../../../helpers/fixtures.ts';
import { waitFor } from '../../../helpers/wait.ts';
import { startWebhookReceiver } from '../../../helpers/webhook-receiver.ts';
import { startTestWorker } from '../../../helpers/worker.ts';

const SECRET = 'webhook-signing-secret-0123456789';
const receiver = await startWebhookReceiver(t, SECRET);
const databaseUrl = await createTestDatabase(t);
const DASHBOARD = 'https://dashboard.example';
const overrides = { PROVIDER_ALLOW_PRIVATE_URLS: 'true', CORS_ORIGINS: DASHBOARD };
const api = await startTestServer(t, databaseUrl, overrides);
const { app, db } = api;
await startTestWorker(t, databaseUrl, overrides);
const member = await createMember(db, 'admin');
const headers = { authorization: `Bearer ${member.token}`, 'x-tenant-id': member.tenantId };
const count = (table: 'channel_updates' | 'chat_messages') =>
  db.oneFirst(
    sql.type(
      z.object({ n: z.number() }),
    )`select count(*)::int as n from ${sql.identifier([table])} where tenant_id = ${member.tenantId}`,
  );

let inboundUrl = '';
async function inbound(
  body: Record<string, unknown>,
  sign: (raw: string) => Record<string, string> = (raw) => signWebhook(SECRET, raw),
) {
  const raw = JSON.stringify(body);
  return fetch(inboundUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...sign(raw) },
    body: raw,
  });
}
const wait = (timeout: number, signal?: AbortSignal) =>
  fetch(`${api.url}/api/channels/webhook/link/wait?timeout=${timeout}`, { headers, signal }).then(async (r) => ({
    status: r.status,
    body: await r.json(),
  }));

t.test('list, config (secrets never returned), unknown channel', async (t) => {
  const list = await app.inject({ url: '/api/channels/', headers });
  t.equal(list.statusCode, 200, list.body);
  t.same(
    list.json().items.map((c: { channel: string; status: string }) => [c.channel, c.status]),
    [
      ['telegram', 'not_linked'],
      ['slack', 'not_linked'],
      ['webhook', 'not_linked'],
    ],
  );
  const unknown = await app.inject({ url: '/api/channels/fax/status', headers });
  t.equal(unknown.statusCode, 404);
  t.match(unknown.json().message, /telegram, slack, webhook/);
  const early = await app.inject({ method: 'POST', url: '/api/channels/webhook/link', headers });
  t.equal(early.statusCode, 409, 'link needs settings first');
  const bad = await app.inject({
    method: 'POST',
    url: '/api/channels/webhook/config',
    headers,
    payload: { botToken: 'x' },
  });
  t.equal(bad.statusCode, 400, "another channel's field is refused");
  const saved = await app.inject({
    method: 'POST',
    url: '/api/channels/webhook/config',
    headers,
    payload: { callbackUrl: receiver.url, signingSecret: SECRET },
  });
  t.equal(saved.statusCode, 200);
  t.notMatch(saved.body, SECRET);
  t.same(saved.json().secrets.signingSecret, { set: true, masked: '••••••••6789' });
  // BASE_URL of the test config is http://localhost:3000; the server listens elsewhere.
  inboundUrl = saved.json().inboundUrl.replace(api.config.baseUrl, api.url);
  const read = await app.inject({ url: '/api/channels/webhook/config', headers });
  t.notMatch(read.body, SECRET, 'GET config never returns the secret');
  const stored = await db.oneFirst(
    sql.type(
      z.object({ s: z.string() }),
    )`select secrets::text as s from channel_links where tenant_id = ${member.tenantId}`,
  );
  t.notMatch(stored, SECRET, 'sealed at rest');
});

t.test("roles and tenants: Viewer on Admin routes 403, another tenant's job 404", async (t) => {
  const viewer = await createMember(db, 'viewer');
  const vh = { authorization: `Bearer ${viewer.token}`, 'x-tenant-id': viewer.tenantId };
  t.equal(
    (await app.inject({ url: '/api/channels/webhook/status', headers: vh })).statusCode,
    200,
    'Viewer reads status',
  );
  for (const [method, url] of [
    ['POST', '/link'],
    ['GET', '/link/wait?timeout=0'],
    ['POST', '/enable'],
    ['POST', '/disable'],
    ['POST', '/disconnect'],
    ['GET', '/config'],
    ['POST', '/config'],
  ] as const) {
    t.equal(
      (
        await app.inject({
          method,
          url: `/api/channels/webhook${url}`,
          headers: vh,
          ...(method === 'POST' ? { payload: {} } : {}),
        })
      ).statusCode,
      403,
      `${method} ${url}`,
    );
  }
  const other = await createMember(db, 'admin');
  const oh = { authorization: `Bearer ${other.token}`, 'x-tenant-id': other.tenantId };
  await app.inject({
    method: 'POST',
    url: '/api/channels/webhook/config',
    headers: oh,
    payload: { callbackUrl: receiver.url, signingSecret: SECRET },
  });
  const theirs = (await app.inject({ method: 'POST', url: '/api/channels/webhook/link', headers: oh })).json().jobId;
  t.equal(
    (await app.inject({ url: `/api/channels/webhook/jobs/${theirs}`, headers })).statusCode,
    404,
    "another tenant's job",
  );
  t.equal(
    (await app.inject({ url: `/api/channels/telegram/jobs/${theirs}`, headers: oh })).statusCode,
    404,
    "another channel's job",
  );
  t.equal((await app.inject({ url: `/api/channels/webhook/jobs/${theirs}`, headers: oh })).statusCode, 200);
});

let linkJob = '';
t.test('link/wait: timeout, 200 waiters woken by one link, a dropped client', async (t) => {
  const started = await app.inject({ method: 'POST', url: '/api/channels/webhook/link', headers });
  t.equal(started.statusCode, 202);
  const { jobId, sessionToken } = started.json();
  linkJob = jobId;
  t.match(
    await wait(0),
    { status: 200, body: { status: 'linking', changed: false } },
    'at the timeout: the current state',
  );

  // A client that goes away frees its waiter at once.
  const dropped = new AbortController();
  const droppedWait = wait(30, dropped.signal).catch(() => 'aborted');
  await waitFor('the waiter', async () => app.channelWaiters.size() === 1);
  dropped.abort();
  t.equal(await droppedWait, 'aborted');
  await waitFor('the waiter to be freed', async () => app.channelWaiters.size() === 0);

  const agent = new http.Agent({ keepAlive: true, maxSockets: 250 });
  t.teardown(() => agent.destroy());
  const waitCount = async () => {
    const metric = (await app.metrics.registry.getSingleMetric('http_request_duration_seconds')!.get()).values.find(
      (v) =>
        (v as { metricName?: string }).metricName === 'http_request_duration_seconds_count' &&
        v.labels.route === '/api/channels/:channel/link/wait' &&
        v.labels.status_code === '200',
    );
    return metric?.value ?? 0;
  };
  const countedBefore = await waitCount();
  // Half of them from the dashboard's origin (CORS).
  const waiters = Array.from(
    { length: 200 },
    (_, i) =>
      new Promise<{ status: string; headers: http.IncomingHttpHeaders }>((resolve, reject) => {
        http
          .get(
            `${api.url}/api/channels/webhook/link/wait?timeout=30`,
            { agent, headers: i % 2 ? { ...headers, origin: DASHBOARD } : headers },
            (res) => {
              let body = '';
              res.on('data', (c) => (body += c));
              res.on('end', () => resolve({ status: JSON.parse(body).status, headers: res.headers }));
            },
          )
          .on('error', reject);
      }),
  );
  await waitFor('200 waiters', async () => app.channelWaiters.size() === 200, 20_000);
  await waitFor('the link job to wait for the binding', async () => {
    const job = (await app.inject({ url: `/api/channels/webhook/jobs/${jobId}`, headers })).json();
    return job.progress?.stage === 'awaiting_binding';
  });
  const endedBefore = { ...app.channelWaiters.ended };
  const bound = await inbound({ id: 'bind-1', from: { id: 'conv-1', name: 'Alice' }, sessionToken });
  t.match(await bound.json(), { ok: true, status: 'bound' });
  const woken = await Promise.all(waiters);
  t.ok(
    woken.every((w) => w.status === 'linked'),
    'every waiter answered linked',
  );
  // A crowd is answered straight to the sockets (broadcast-answer.ts), with a normal answer's headers.
  t.ok(
    woken.every(
      (w) => w.headers['content-type'] === 'application/json; charset=utf-8' && w.headers.connection === 'close',
    ),
    'JSON, connection closed',
  );
  t.equal(new Set(woken.map((w) => w.headers['x-request-id'])).size, 200, 'each with its own request id');
  t.ok(
    woken.every((w, i) =>
      i % 2
        ? w.headers['access-control-allow-origin'] === DASHBOARD
        : w.headers['access-control-allow-origin'] === undefined,
    ),
    'CORS headers where the origin is allowed',
  );
  t.ok(
    woken.every((w) => typeof w.headers.date === 'string'),
    'dated',
  );
  t.equal((await waitCount()) - countedBefore, 200, 'counted in the request metrics');
  // Woken by the NOTIFY of the change, none by its 30 s timeout.
  t.equal(app.channelWaiters.ended.woken - endedBefore.woken, 200, 'all 200 woken by the change');
  t.equal(app.channelWaiters.ended.timeout, endedBefore.timeout, 'none timed out');
  t.equal(app.channelWaiters.size(), 0);
  const job = await waitFor('the link job', async () => {
    const j = (await app.inject({ url: `/api/channels/webhook/jobs/${jobId}`, headers })).json();
    return j.status === 'succeeded' ? j : null;
  });
  t.match(job.result, { state: 'linked', account: { conversationId: 'conv-1' } });
  t.match(await wait(5), { body: { status: 'linked', changed: false } }, 'nothing pending: answers at once');
});

t.test('signatures: tampered, unsigned, stale refused and nothing stored', async (t) => {
  const before = await count('channel_updates');
  const body = { id: 'sig-1', from: { id: 'conv-1' }, text: 'hi' };
  const tampered = await inbound(body, (raw) => signWebhook(SECRET, raw.replace('hi', 'ho')));
  const unsigned = await inbound(body, () => ({}));
  const stale = await inbound(body, (raw) => signWebhook(SECRET, raw, Date.now() - 10 * 60_000));
  const wrongKey = await inbound(body, (raw) => signWebhook('another-secret-0123456789', raw));
  t.same([tampered.status, unsigned.status, stale.status, wrongKey.status], [401, 401, 401, 401]);
  t.equal(await count('channel_updates'), before, 'nothing stored');
  const unknown = await fetch(inboundUrl.replace(/[0-9a-f-]{36}$/, '00000000-0000-4000-8000-000000000000'), {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: '{}',
  });
  t.equal(unknown.status, 404);
});

t.test('linked but not enabled: stored, not answered; enabled: a turn and one signed reply', async (t) => {
  const stored = await (await inbound({ id: 'm-0', from: { id: 'conv-1' }, text: 'before enable' })).json();
  t.match(stored, { status: 'stored', jobId: null });
  t.equal(
    (await app.inject({ method: 'POST', url: '/api/channels/webhook/enable', headers })).json().status,
    'enabled',
  );
  const first = await (await inbound({ id: 'm-1', from: { id: 'conv-1' }, text: 'Hello channel' })).json();
  t.match(first, { ok: true, status: 'turn', duplicate: false });
  const again = await (await inbound({ id: 'm-1', from: { id: 'conv-1' }, text: 'Hello channel' })).json();
  t.match(again, { status: 'turn', duplicate: true, jobId: first.jobId }, 'the same update twice: one turn');
  t.match(await (await inbound({ id: 'm-x', from: { id: 'someone-else' }, text: 'hi' })).json(), { status: 'ignored' });
  const reply = await waitFor('the reply', async () => receiver.state.replies[0]);
  t.equal(reply.to, 'conv-1');
  const assistant = await db.oneFirst(
    sql.type(z.object({ content: z.string() }))`select content from chat_messages where job_id = ${first.jobId}`,
  );
  t.equal(reply.text, assistant);
  t.equal(reply.idempotencyKey, reply.id, 'the reply carries its delivery id as Idempotency-Key');
  const status = await waitFor('the outbound count', async () => {
    const s = (await app.inject({ url: '/api/channels/webhook/status', headers })).json();
    return s.outboundCount === 1 ? s : null;
  });
  t.match(
    status,
    { status: 'enabled', inboundCount: 4, outboundCount: 1, account: { conversationId: 'conv-1' } },
    'the duplicate is not counted',
  );
  t.equal(receiver.state.replies.length, 1, 'exactly one reply');
  const activity = (await app.inject({ url: '/api/activity/channels?limit=1', headers })).json();
  t.match(activity.items, [{ channel: 'webhook', status: 'enabled', inboundCount: 4, outboundCount: 1 }]);
});

t.test('over quota: the refusal is answered to the channel user', async (t) => {
  await db.query(sql.unsafe`
    insert into tenant_message_counts (tenant_id, month, messages) values (${member.tenantId}, date_trunc('month', now() at time zone 'UTC')::date, 100000)
    on conflict (tenant_id, month) do update set messages = 100000`);
  const res = await (await inbound({ id: 'm-quota', from: { id: 'conv-1' }, text: 'one more' })).json();
  t.match(res, { status: 'refused', jobId: null });
  const reply = await waitFor('the refusal', async () =>
    receiver.state.replies.find((r) => /messages a month/.test(r.text)),
  );
  t.equal(reply.to, 'conv-1');
});

t.test('disconnect: credentials and binding gone at once, inbound refused', async (t) => {
  const res = await app.inject({ method: 'POST', url: '/api/channels/webhook/disconnect', headers });
  t.equal(res.statusCode, 202);
  t.equal((await inbound({ id: 'm-after', from: { id: 'conv-1' }, text: 'hi' })).status, 404, 'refused');
  const config = (await app.inject({ url: '/api/channels/webhook/config', headers })).json();
  t.match(config, { config: {}, secrets: { signingSecret: { set: false } }, inboundUrl: null });
  t.equal((await app.inject({ url: '/api/channels/webhook/status', headers })).json().status, 'not_linked');
  t.equal((await app.inject({ url: `/api/channels/webhook/jobs/${linkJob}`, headers })).statusCode, 200);
});
