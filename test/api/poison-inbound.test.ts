// Text from outside that PostgreSQL cannot store (a NUL, a lone surrogate,
// sent as raw JSON escapes) on the routes that read their bytes past the
// input guard, because a signature covers them: a channel's message (and
// the channel's answer to our reply), a Stripe event, altidp's notification,
// and a name in an identity token. Each
// is accepted and stored made storable (NUL dropped, U+FFFD in place of the
// surrogate) instead of failing with a 500 at every delivery.
import Stripe from 'stripe';
import t from 'tap';
import { z } from 'zod';
import { sql } from '../../core/db/pool.ts';
import { startTestServer } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { createMember } from '../helpers/fixtures.ts';
import { startOidcServer } from '../helpers/oidc-server.ts';
import { waitFor } from '../helpers/wait.ts';
import { linkWebhookChannel } from '../helpers/webhook-channel.ts';
import { startWebhookReceiver } from '../helpers/webhook-receiver.ts';
import { startTestWorker } from '../helpers/worker.ts';

const CHANNEL_SECRET = 'webhook-signing-secret-poison-0123';
const STRIPE_SECRET = 'whsec_test_poison_suite';
const op = await startOidcServer(t, {
  clients: [
    {
      client_id: 'platform-alt',
      client_secret: 'platform-alt-secret-0123456789',
      redirect_uris: ['http://localhost:3000/api/auth/altidp/callback'],
    },
  ],
});
const receiver = await startWebhookReceiver(t, CHANNEL_SECRET);
const databaseUrl = await createTestDatabase(t);
const env = {
  PROVIDER_ALLOW_PRIVATE_URLS: 'true',
  ALTIDP_ISSUER: op.issuer,
  ALTIDP_CLIENT_ID: 'platform-alt',
  // Stripe mode without a Stripe: the events below name no tenant, so nothing calls it.
  STRIPE_SECRET_KEY: 'sk_test_poison',
  STRIPE_WEBHOOK_SECRET: STRIPE_SECRET,
  STRIPE_PRICE_PRO: 'price_pro',
  STRIPE_PRICE_ENTERPRISE: 'price_enterprise',
  STRIPE_PRICE_AGENT_ADDON: 'price_addon',
};
const api = await startTestServer(t, databaseUrl, env);
const { app, db } = api;
await startTestWorker(t, databaseUrl, env);

const POISON = 'before\u0000after half \ud800 pair';
const STORED = 'beforeafter half \ufffd pair';

t.test('a channel message: stored made storable, and its turn answers it', async (t) => {
  const member = await createMember(db, 'admin');
  const headers = { authorization: `Bearer ${member.token}`, 'x-tenant-id': member.tenantId };
  const channel = await linkWebhookChannel(api, headers, receiver, CHANNEL_SECRET, 'conv-poison');
  // The tenant's system acknowledges the reply with an id of the same kind.
  receiver.state.script.push({ body: { id: `reply-${POISON}` } });
  const sent = await channel.say(POISON);
  t.match(sent, { status: 'turn', jobId: String });
  if (!sent.jobId) return; // refused: nothing to wait for
  const job = await waitFor('the turn to end', async () => {
    const j = (await app.inject({ url: `/api/chat/jobs/${sent.jobId}`, headers })).json();
    return ['succeeded', 'failed'].includes(j.status) ? j : null;
  });
  t.equal(job.status, 'succeeded');
  const stored = await db.oneFirst(sql.type(z.object({ content: z.string() }))`
    select m.content from chat_messages m join jobs j on j.input->>'userMessageId' = m.id::text where j.id = ${sent.jobId}`);
  t.equal(stored, STORED);
  const delivery = await waitFor('the reply to be sent', () =>
    db.maybeOne(sql.type(z.object({ provider_message_id: z.string().nullable() }))`
      select provider_message_id from channel_deliveries where key = ${`turn:${sent.jobId}`} and status = 'sent'`),
  );
  t.equal(delivery.provider_message_id, `reply-${STORED}`, "the channel's answer, made storable");
  t.equal((await channel.say('and the next one')).status, 'turn', 'the channel goes on');
});

t.test('a Stripe event: stored once, made storable', async (t) => {
  const event = {
    id: 'evt_poison_1',
    object: 'event',
    type: 'customer.subscription.updated',
    created: Math.floor(Date.now() / 1000),
    livemode: false,
    data: { object: { id: 'sub_1', object: 'subscription', customer: 'cus_\u0000x', metadata: { note: POISON } } },
  };
  const payload = JSON.stringify(event);
  t.match(payload, /\\u0000.*\\ud800/, 'raw JSON escapes on the wire');
  const header = new Stripe('sk_test_poison').webhooks.generateTestHeaderString({ payload, secret: STRIPE_SECRET });
  const res = await app.inject({
    method: 'POST',
    url: '/api/billing/webhook',
    headers: { 'content-type': 'application/json', 'stripe-signature': header },
    payload,
  });
  t.equal(res.statusCode, 200, res.body);
  const row = await db.one(sql.type(z.object({ status: z.string(), payload: z.any() }))`
    select status, payload from billing_events where event_id = 'evt_poison_1'`);
  t.equal(row.status, 'ignored', 'no tenant of ours');
  t.same(row.payload.data.object, {
    id: 'sub_1',
    object: 'subscription',
    customer: 'cus_x',
    metadata: { note: STORED },
  });
});

t.test("altidp's notification and an identity token's name", async (t) => {
  const now = Math.floor(Date.now() / 1000);
  const jws = await op.sign({
    iss: op.issuer,
    aud: 'platform-alt',
    iat: now,
    exp: now + 300,
    jti: 'poison-1',
    note: POISON,
    events: JSON.stringify({ event_time: now * 1000, type: 'some-new-type', sub: 'sub-poison' }),
  });
  const res = await app.inject({ method: 'POST', url: '/api/auth/altidp/notifications', payload: { payload: jws } });
  t.equal(res.statusCode, 200, res.body);
  const claims = await db.oneFirst(sql.type(z.object({ claims: z.any() }))`
    select claims from altidp_notifications where dedupe_key = 'jti:poison-1'`);
  t.equal(claims.note, STORED);

  const token = await op.sign({
    iss: op.issuer,
    aud: 'platform-alt',
    sub: 'sub-poison-name',
    email: 'poison-name@example.test',
    email_verified: true,
    name: POISON,
    iat: now,
    exp: now + 600,
  });
  const login = await app.inject({ method: 'POST', url: '/api/auth/altidp', payload: { identityToken: token } });
  t.equal(login.statusCode, 200, login.body);
  t.equal(login.json().user.name, STORED, 'the name, made storable');

  const bad = await op.sign({
    iss: op.issuer,
    aud: 'platform-alt',
    sub: 'sub-\u0000',
    email: 'poison-sub@example.test',
    email_verified: true,
    iat: now,
    exp: now + 600,
  });
  const refused = await app.inject({ method: 'POST', url: '/api/auth/altidp', payload: { identityToken: bad } });
  t.match(refused, { statusCode: 502 }, 'a subject is never mended (two could become one)');
  t.match(refused.json(), { error: 'provider_unavailable' });
});
