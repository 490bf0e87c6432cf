// A channel's replies go out in the order of its messages, also while some
// of them wait parked for a retry and two workers fetch at once: the reply
// queue is held by the first reply until it is sent (found by npm run soak:
// a reply queued while an earlier one waited went out before it).
import t from 'tap';
import { z } from 'zod';
import { sql } from '../../core/db/pool.ts';
import { startTestServer } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { createMember } from '../helpers/fixtures.ts';
import { waitFor } from '../helpers/wait.ts';
import { linkWebhookChannel } from '../helpers/webhook-channel.ts';
import { startFakeServer } from '../helpers/channel-servers.ts';
import { startTestWorker } from '../helpers/worker.ts';

const SECRET = 'webhook-signing-secret-reply-order';
// Replies as they are acknowledged; the first arrival of every third reply is refused (503, Retry-After: 1).
const acknowledged: string[] = [];
const seen = new Set<string>();
// Every arrival, for the timeline a failure prints.
const arrivals: Array<{ key: string; at: string; refused: boolean }> = [];
const { url: receiverUrl } = await startFakeServer(t, (req) => {
  const key = String(req.headers['idempotency-key']);
  const first = !seen.has(key);
  seen.add(key);
  const refused = first && seen.size % 3 === 1;
  arrivals.push({ key, at: new Date().toISOString(), refused });
  if (refused) return { status: 503, headers: { 'retry-after': '1' }, body: { error: 'busy' } };
  return { body: { id: key }, onDelivered: () => acknowledged.push((JSON.parse(req.raw) as { text: string }).text) };
});
const receiver = { url: `${receiverUrl}/replies` };
const databaseUrl = await createTestDatabase(t);
const overrides = { PROVIDER_ALLOW_PRIVATE_URLS: 'true', WORKER_PARK_SWEEP_MS: '100' };
const api = await startTestServer(t, databaseUrl, overrides);
const { db } = api;

t.test('24 messages, every third reply refused once with 503: the replies arrive in message order', async (t) => {
  await startTestWorker(t, databaseUrl, overrides);
  await startTestWorker(t, databaseUrl, overrides);
  const member = await createMember(db, 'admin');
  const channel = await linkWebhookChannel(
    api,
    { authorization: `Bearer ${member.token}`, 'x-tenant-id': member.tenantId },
    receiver,
    SECRET,
  );
  for (let i = 0; i < 24; i++) {
    await channel.say(`message ${i}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  await waitFor('every reply', async () => acknowledged.length >= 24, 60_000).catch(async (error) => {
    const jobs = await db.any(
      sql.unsafe`select kind, status, attempts, error::text as error from jobs where tenant_id = ${member.tenantId} and status <> 'succeeded'`,
    );
    const graphile = await db.any(
      sql.unsafe`select g.id, g.locked_by, g.locked_at, g.attempts, g.run_at, q.locked_by as q_locked_by, q.locked_at as q_locked_at from graphile_worker._private_jobs g left join graphile_worker._private_job_queues q on q.id = g.job_queue_id`,
    );
    t.comment(JSON.stringify({ replies: acknowledged.length, jobs, graphile }, null, 1));
    throw error;
  });
  const texts = await db.anyFirst(sql.type(z.object({ content: z.string() }))`
    select m.content from chat_messages m join chat_sessions s on s.id = m.session_id where s.tenant_id = ${member.tenantId} and m.role = 'assistant' order by m.seq`);
  t.same(acknowledged, texts, 'in message order');
  if (JSON.stringify(acknowledged) !== JSON.stringify(texts)) {
    // What happened, for whoever looks into it: each delivery job's times, its failures, its session events, and every arrival.
    const jobs = await db.any(sql.unsafe`
      select j.id, d.key, j.status, j.attempts, j.created_at, j.started_at, j.finished_at,
        (select json_agg(json_build_object('at', h.at, 'event', h.event, 'attempt', h.attempt) order by h.id) from job_history h where h.job_id = j.id) as failures,
        (select json_agg(json_build_object('at', e.at, 'event', e.event, 'attempt', e.attempt) order by e.id) from session_job_events e where e.job_id = j.id) as events
      from jobs j join channel_deliveries d on d.job_id = j.id where j.tenant_id = ${member.tenantId} order by j.created_at`);
    t.comment(JSON.stringify({ jobs, arrivals }, null, 1));
  }
});
