// Webhook-channel turns under load and when things go wrong, on a real
// worker: a burst of concurrent signed messages with repeats (each stored and
// answered once, duplicates answered the same, counters exact), delivery jobs
// in the session's activity, a failed turn answered with one apology, and a
// cancelled link job ending cancelled with the channel back to not_linked.
import t from 'tap';
import { z } from 'zod';
import { TURN_FAILED_TEXT } from '../../../../core/channels/deliver.ts';
import { signWebhook } from '../../../../core/channels/webhook.ts';
import { sql } from '../../../../core/db/pool.ts';
import { startTestServer } from '../../../helpers/app.ts';
import { createTestDatabase } from '../../../helpers/db.ts';
import { createMember } from '../../../helpers/fixtures.ts';
import { waitFor } from '../../../helpers/wait.ts';
import { startWebhookReceiver } from '../../../helpers/webhook-receiver.ts';
import { startTestWorker } from '../../../helpers/worker.ts';

const SECRET = 'webhook-signing-secret-turns-0123';
const receiver = await startWebhookReceiver(t, SECRET);
const databaseUrl = await createTestDatabase(t);
const overrides = { PROVIDER_ALLOW_PRIVATE_URLS: 'true' };
const api = await startTestServer(t, databaseUrl, overrides);
const { app, db } = api;
await startTestWorker(t, databaseUrl, overrides);

type Member = Awaited<ReturnType<typeof createMember>>;
const headersOf = (m: Member) => ({ authorization: `Bearer ${m.token}`, 'x-tenant-id': m.tenantId });

async function configure(m: Member): Promise<string> {
  const saved = await app.inject({
    method: 'POST',
    url: '/api/channels/webhook/config',
    headers: headersOf(m),
    payload: { callbackUrl: receiver.url, signingSecret: SECRET },
  });
  return saved.json().inboundUrl.replace(api.config.baseUrl, api.url);
}
async function inbound(url: string, body: Record<string, unknown>) {
  const raw = JSON.stringify(body);
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...signWebhook(SECRET, raw) },
    body: raw,
  });
  return { status: res.status, body: await res.json() };
}
const jobStatus = async (m: Member, jobId: string) =>
  (await app.inject({ url: `/api/channels/webhook/jobs/${jobId}`, headers: headersOf(m) })).json();

const member = await createMember(db, 'admin');
const headers = headersOf(member);
let url = '';
let sessionId = '';

t.before(async () => {
  url = await configure(member);
  const { jobId, sessionToken } = (
    await app.inject({ method: 'POST', url: '/api/channels/webhook/link', headers })
  ).json();
  await waitFor(
    'awaiting the binding',
    async () => (await jobStatus(member, jobId)).progress?.stage === 'awaiting_binding',
  );
  const bound = await inbound(url, { id: 'bind', from: { id: 'conv-9' }, sessionToken });
  if (bound.body.status !== 'bound') throw new Error(`not bound: ${JSON.stringify(bound.body)}`);
  await app.inject({ method: 'POST', url: '/api/channels/webhook/enable', headers });
  sessionId = await db.oneFirst(
    sql.type(
      z.object({ session_id: z.string() }),
    )`select session_id from channel_links where tenant_id = ${member.tenantId}`,
  );
});

t.test('a burst of 30 concurrent messages with repeats: each stored and answered once', async (t) => {
  const ids = Array.from({ length: 20 }, (_, i) => `burst-${i}`);
  const sends = [...ids, ...ids.slice(0, 10)].map((id) =>
    inbound(url, { id, from: { id: 'conv-9' }, text: `message ${id}` }),
  );
  const answers = await Promise.all(sends);
  t.ok(
    answers.every((a) => a.status === 200 && a.body.status === 'turn'),
    'every one a turn (first or repeat)',
  );
  const byId = new Map<string, string>();
  for (const [i, a] of answers.entries()) {
    const id = i < 20 ? ids[i]! : ids[i - 20]!;
    if (byId.has(id)) t.equal(a.body.jobId, byId.get(id), `${id}: the repeat answers the same turn`);
    else byId.set(id, a.body.jobId);
  }
  t.equal(answers.filter((a) => a.body.duplicate).length, 10, 'ten repeats');
  t.equal(new Set(answers.map((a) => a.body.jobId)).size, 20, 'twenty turns');
  const stored = await db.oneFirst(sql.type(z.object({ n: z.number() }))`
    select count(*)::int as n from channel_updates where tenant_id = ${member.tenantId} and external_id like 'burst-%'`);
  t.equal(stored, 20);
  await waitFor('twenty replies', async () => receiver.state.replies.length >= 20, 30_000);
  const status = await waitFor('the counters', async () => {
    const s = (await app.inject({ url: '/api/channels/webhook/status', headers })).json();
    return s.outboundCount === 20 ? s : null;
  });
  t.match(status, { inboundCount: 21, outboundCount: 20 }, 'the binding message and twenty, repeats not counted');
  t.equal(receiver.state.replies.length, 20, 'one reply per turn');
});

t.test('delivery jobs carry the chat session: they are in its activity', async (t) => {
  const jobs = await db.any(sql.type(z.object({ session_id: z.string().nullable() }))`
    select session_id from jobs where tenant_id = ${member.tenantId} and kind = 'channel.deliver'`);
  t.ok(jobs.length >= 20 && jobs.every((j) => j.session_id === sessionId), 'every delivery job has the session');
  const kinds = new Set<string>();
  let cursor: string | null = null;
  do {
    const page: { items: Array<{ type: string; job?: { kind: string } }>; nextCursor: string | null } = (
      await app.inject({
        url: `/api/activity/sessions/${sessionId}/entries?limit=100${cursor ? `&cursor=${cursor}` : ''}`,
        headers,
      })
    ).json();
    for (const e of page.items) if (e.job) kinds.add(e.job.kind);
    cursor = page.nextCursor;
  } while (cursor);
  t.ok(kinds.has('channel.deliver'), `channel deliveries listed (kinds: ${[...kinds].join(', ')})`);
  t.ok(kinds.has('chat.turn'));
});

t.test('a turn that fails for good: one apology to the channel user', async (t) => {
  await db.query(sql.unsafe`update chat_sessions set model = 'nosuchprovider:none' where id = ${sessionId}`);
  const before = receiver.state.replies.length;
  const sent = await inbound(url, { id: 'fails-1', from: { id: 'conv-9' }, text: 'this one fails' });
  t.equal(sent.body.status, 'turn');
  const turn = await waitFor('the failed turn', async () => {
    const j = (await app.inject({ url: `/api/jobs/${sent.body.jobId}`, headers })).json();
    return j.status === 'failed' ? j : null;
  });
  t.match(turn.error, { retrying: false });
  const apology = await waitFor('the apology', async () =>
    receiver.state.replies.slice(before).find((r) => r.text === TURN_FAILED_TEXT),
  );
  t.equal(apology.to, 'conv-9');
  await waitFor('its delivery job', async () => {
    const n = await db.oneFirst(sql.type(z.object({ n: z.number() }))`
      select count(*)::int as n from channel_deliveries d join jobs j on j.id = d.job_id
      where d.tenant_id = ${member.tenantId} and d.key = ${`failure:${sent.body.jobId}`} and j.status = 'succeeded'`);
    return n === 1;
  });
  t.equal(receiver.state.replies.slice(before).length, 1, 'exactly one message for the failed turn');
  await db.query(sql.unsafe`update chat_sessions set model = null where id = ${sessionId}`);
});

t.test('cancelling a pending link job: cancelled, the channel back to not_linked, the token dead', async (t) => {
  const other = await createMember(db, 'admin');
  const otherUrl = await configure(other);
  const oh = headersOf(other);
  const { jobId, sessionToken } = (
    await app.inject({ method: 'POST', url: '/api/channels/webhook/link', headers: oh })
  ).json();
  await waitFor(
    'awaiting the binding',
    async () => (await jobStatus(other, jobId)).progress?.stage === 'awaiting_binding',
  );
  const cancelled = await app.inject({ method: 'POST', url: `/api/jobs/${jobId}/cancel`, headers: oh });
  t.equal(cancelled.statusCode, 200, cancelled.body);
  t.equal(cancelled.json().status, 'cancelled');
  t.equal((await app.inject({ url: '/api/channels/webhook/status', headers: oh })).json().status, 'not_linked');
  t.match(
    (await inbound(otherUrl, { id: 'late-bind', from: { id: 'conv-x' }, sessionToken })).body,
    { status: 'ignored' },
    'the token no longer binds',
  );
  t.equal((await jobStatus(other, jobId)).status, 'cancelled');
});
