// Billing with Stripe, end to end: the real stripe SDK in the api and the
// worker talks to a local server that speaks Stripe's API; webhooks are
// signed with the SDK's test-header helper and applied by a real worker.
import { randomUUID } from 'node:crypto';
import Stripe from 'stripe';
import t from 'tap';
import { z } from 'zod';
import { signPlatformToken } from '../../../../core/auth/platform-token.ts';
import { createCompany } from '../../../../core/companies/companies.ts';
import { sql } from '../../../../core/db/pool.ts';
import { createRegistration } from '../../../../core/identity/registrations.ts';
import { createManagedAgent } from '../../../../core/managed-agents/managed-agents.ts';
import { buildTestApp } from '../../../helpers/app.ts';
import { TEST_SECRET } from '../../../helpers/config.ts';
import { createTestDatabase, testPool } from '../../../helpers/db.ts';
import { createMember, markClaimed } from '../../../helpers/fixtures.ts';
import { startStripeServer } from '../../../helpers/stripe-server.ts';
import { waitFor } from '../../../helpers/wait.ts';
import { startTestWorker } from '../../../helpers/worker.ts';
import { agentAccessToken } from '../../../helpers/principals.ts';

const databaseUrl = await createTestDatabase(t);
const direct = await testPool(t, databaseUrl);
const prices = { pro: 'price_test_pro', enterprise: 'price_test_enterprise', agentAddon: 'price_test_addon' };
const stripeServer = await startStripeServer(t, direct, { prices });
const WEBHOOK_SECRET = 'whsec_test_billing_suite';
const env = {
  STRIPE_SECRET_KEY: stripeServer.secretKey,
  STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET,
  STRIPE_API_BASE: stripeServer.url,
  STRIPE_PRICE_PRO: prices.pro,
  STRIPE_PRICE_ENTERPRISE: prices.enterprise,
  STRIPE_PRICE_AGENT_ADDON: prices.agentAddon,
};
const { app, db, config } = await buildTestApp(t, databaseUrl, env);
await startTestWorker(t, databaseUrl, env);
const local = new URL(stripeServer.url);
// The test's own SDK also talks to the local server only (never api.stripe.com).
const sdk = new Stripe(stripeServer.secretKey, { host: local.hostname, port: Number(local.port), protocol: 'http' });

t.equal(config.billing.mode, 'stripe');

const tenantHeaders = (m: { tenantId: string; token: string }) => ({
  authorization: `Bearer ${m.token}`,
  'x-tenant-id': m.tenantId,
});
const post = (m: { tenantId: string; token: string }, url: string, headers: Record<string, string> = {}) =>
  app.inject({ method: 'POST', url, headers: { ...tenantHeaders(m), ...headers } });
const status = async (m: { tenantId: string; token: string }) =>
  (await app.inject({ url: '/api/billing/status', headers: tenantHeaders(m) })).json();

/** Sends an event to the webhook the way Stripe does: signed over the exact bytes. */
async function deliver(event: unknown, options: { secret?: string; timestamp?: number; tamper?: boolean } = {}) {
  const payload = JSON.stringify(event);
  const header = sdk.webhooks.generateTestHeaderString({
    payload,
    secret: options.secret ?? WEBHOOK_SECRET,
    ...(options.timestamp ? { timestamp: options.timestamp } : {}),
  });
  return app.inject({
    method: 'POST',
    url: '/api/billing/webhook',
    headers: { 'content-type': 'application/json', 'stripe-signature': header },
    payload: options.tamper ? payload.replace('"livemode":false', '"livemode":true ') : payload,
  });
}

const eventRows = (eventId: string) =>
  direct.any(sql.type(z.object({ status: z.string(), outcome: z.string().nullable(), job_id: z.string().nullable() }))`
    select status, outcome, job_id from billing_events where event_id = ${eventId}`);
const settled = (eventId: string) =>
  waitFor(`event ${eventId} to be processed`, async () => {
    const [row] = await eventRows(eventId);
    return row && row.status !== 'queued' ? row : null;
  });
const planOf = async (tenantId: string) =>
  direct.oneFirst(sql.type(z.object({ plan: z.string() }))`select plan from tenants where id = ${tenantId}`);

/** Checkout, then "Pay" on the local Stripe: returns the events Stripe would send, in order. */
async function subscribe(m: { tenantId: string; token: string }, url = '/api/billing/checkout') {
  const res = await post(m, url);
  if (res.statusCode !== 200) throw new Error(`checkout: ${res.statusCode} ${res.body}`);
  const before = stripeServer.events.length;
  await stripeServer.api.completeCheckout(res.json().sessionId);
  return stripeServer.events.slice(before);
}

async function addMember(tenantId: string, role: 'admin' | 'viewer') {
  const userId = randomUUID();
  await direct.query(sql.unsafe`insert into users (id, email) values (${userId}, ${`${userId}@example.test`})`);
  await direct.query(
    sql.unsafe`insert into tenant_memberships (tenant_id, user_id, role) values (${tenantId}, ${userId}, ${role})`,
  );
  return {
    tenantId,
    userId,
    token: await signPlatformToken({ userId }, Buffer.from(TEST_SECRET, 'base64'), 'http://localhost:3000'),
  };
}

t.test(
  'checkout: a URL for the person, Admin only, tenant-checked; the plan changes when the event is applied',
  async (t) => {
    const admin = await createMember(direct);
    const viewer = await addMember(admin.tenantId, 'viewer');
    const stranger = await createMember(direct);

    t.equal((await post(viewer, '/api/billing/checkout')).statusCode, 403, 'Viewer');
    const foreign = await post({ tenantId: admin.tenantId, token: stranger.token }, '/api/billing/checkout');
    t.equal(foreign.statusCode, 404, "another tenant's id reads as absent");
    t.equal(
      (await post(admin, '/api/billing/portal')).json().error,
      'no_billing_customer',
      'no portal before a customer',
    );

    const checkout = await post(admin, '/api/billing/checkout');
    t.equal(checkout.statusCode, 200);
    t.match(checkout.json().url, /^http:\/\/.+\/billing\/sandbox\/checkout\/cs_/, 'the checkout page URL');
    t.notMatch(checkout.json().url, /token|Bearer/i, 'no credential in the URL');
    t.equal(await planOf(admin.tenantId), 'free', 'nothing changes before payment');
    t.equal(
      (await sdk.checkout.sessions.retrieve(checkout.json().sessionId)).client_reference_id,
      admin.tenantId,
      'bound to the tenant',
    );

    const before = stripeServer.events.length;
    await stripeServer.api.completeCheckout(checkout.json().sessionId);
    const events = stripeServer.events.slice(before);
    t.same(
      events.map((e) => e.type),
      ['customer.subscription.created', 'checkout.session.completed', 'invoice.paid'],
    );
    for (const event of events) {
      const res = await deliver(event);
      t.equal(res.statusCode, 200, `${event.type} accepted`);
      t.same(res.json(), { received: true, duplicate: false, status: 'queued' });
    }
    for (const event of events) t.equal((await settled(event.id)).status, 'applied', `${event.type} applied`);
    t.equal(await planOf(admin.tenantId), 'pro');
    const s = await status(admin);
    t.match(s, {
      plan: 'pro',
      status: 'active',
      source: 'stripe',
      limits: { companyWork: true },
      agentSlots: { included: 10, addons: 0 },
    });
    t.ok(new Date(s.periodEnd).getTime() > Date.now() + 20 * 86_400_000, 'period end about a month away');
    t.equal((await post(admin, '/api/billing/checkout')).json().error, 'already_on_plan', 'already on pro → 409');
    t.equal((await post(admin, '/api/billing/checkout')).statusCode, 409);
    t.equal(
      (await post(admin, '/api/billing/checkout/enterprise')).json().error,
      'subscription_exists',
      'an upgrade goes through the portal, never a second subscription',
    );
    const portal = await post(admin, '/api/billing/portal');
    t.equal(portal.statusCode, 200);
    t.match(portal.json().url, /\/billing\/sandbox\/portal\//);
    const changes = await direct.any(sql.type(
      z.object({ from_plan: z.string(), to_plan: z.string(), source: z.string().nullable() }),
    )`
    select from_plan, to_plan, source from billing_changes where tenant_id = ${admin.tenantId}`);
    t.same(changes, [{ from_plan: 'free', to_plan: 'pro', source: 'stripe' }], 'the change is recorded once');
  },
);

t.test('two racing checkouts create one Stripe customer', async (t) => {
  const admin = await createMember(direct);
  const [a, b] = await Promise.all([post(admin, '/api/billing/checkout'), post(admin, '/api/billing/checkout')]);
  t.equal(a.statusCode, 200);
  t.equal(b.statusCode, 200);
  const stored = await direct.anyFirst(sql.type(z.object({ stripe_customer_id: z.string() }))`
    select stripe_customer_id from billing_customers where tenant_id = ${admin.tenantId}`);
  t.equal(stored.length, 1);
  const objects = await direct.oneFirst(sql.type(z.object({ n: z.number() }))`
    select count(*)::int as n from billing_sandbox_objects where object = 'customer' and data -> 'metadata' ->> 'tenant_id' = ${admin.tenantId}`);
  t.equal(objects, 1, 'Stripe has one customer for the tenant');
});

t.test('signatures: tampered, wrong secret, stale, missing → 400 and nothing stored', async (t) => {
  const admin = await createMember(direct);
  const [created] = await subscribe(admin);
  const cases = [
    ['tampered body', await deliver(created, { tamper: true })],
    ['wrong secret', await deliver(created, { secret: 'whsec_someone_else' })],
    ['stale timestamp', await deliver(created, { timestamp: Math.floor(Date.now() / 1000) - 600 })],
    ['a timestamp an hour ahead', await deliver(created, { timestamp: Math.floor(Date.now() / 1000) + 3_600 })],
    [
      'no signature',
      await app.inject({
        method: 'POST',
        url: '/api/billing/webhook',
        headers: { 'content-type': 'application/json' },
        payload: JSON.stringify(created),
      }),
    ],
  ] as const;
  for (const [what, res] of cases) {
    t.equal(res.statusCode, 400, what);
    t.match(
      res.json(),
      { status: 400, error: 'invalid_signature' },
      `${what}: invalid_signature, in the platform error shape`,
    );
  }
  t.same(await eventRows(created!.id), [], 'nothing stored');
  t.equal(await planOf(admin.tenantId), 'free');
});

t.test('the same event twice is applied once; an older event never overwrites newer state', async (t) => {
  const admin = await createMember(direct);
  const events = await subscribe(admin);
  const created = events[0]!;
  t.equal((await deliver(created)).json().duplicate, false);
  const again = await deliver(created);
  t.equal(again.statusCode, 200);
  t.same(again.json().duplicate, true, 'second delivery is a duplicate');
  await settled(created.id);
  const rows = await eventRows(created.id);
  t.equal(rows.length, 1, 'one row');
  const jobs = await direct.oneFirst(sql.type(z.object({ n: z.number() }))`
    select count(*)::int as n from jobs where tenant_id = ${admin.tenantId} and kind = 'billing.webhook'`);
  t.equal(jobs, 1, 'one job');
  t.equal(await planOf(admin.tenantId), 'pro');

  // Stripe cancels; the deletion event is applied...
  const subscriptionId = (created.data.object as { id: string }).id;
  const before = stripeServer.events.length;
  await sdk.subscriptions.cancel(subscriptionId);
  const deleted = stripeServer.events.slice(before).find((e) => e.type === 'customer.subscription.deleted')!;
  t.ok(deleted, 'Stripe sent the deletion');
  await deliver(deleted);
  t.equal((await settled(deleted.id)).status, 'applied');
  t.equal(await planOf(admin.tenantId), 'free', 'free after the deletion');

  // ...and a late "updated" from before it (active, older timestamp) is ignored.
  const late = {
    ...created,
    id: `evt_late_${randomUUID().slice(0, 8)}`,
    type: 'customer.subscription.updated',
    created: created.created - 60,
  };
  t.equal((await deliver(late)).statusCode, 200);
  t.match(await settled(late.id), { status: 'ignored', outcome: 'older_than_state' });
  t.equal(await planOf(admin.tenantId), 'free', 'still free');
  t.match(await status(admin), { plan: 'free', status: 'canceled', source: 'stripe' });
});

t.test('a deleted subscription: free plan at once for new work, data kept, company reads 402', async (t) => {
  const { registration } = await createRegistration(db, { type: 'anonymous', ip: '127.0.0.1', claimTokenTtlS: 600 });
  await markClaimed(direct, registration.id);
  const admin = await addMember(registration.tenant_id, 'admin');
  const company = await createCompany(direct, registration.tenant_id, null, { name: 'Acme', description: 'Anvils' });
  const token = await agentAccessToken(app, config, registration, ['svc:companies:read']);
  const read = () =>
    app.inject({ url: `/api/agent/v1/companies/${company.id}`, headers: { authorization: `Bearer ${token}` } });
  t.equal((await read()).statusCode, 402, 'free: plan_required');

  const events = await subscribe(admin);
  for (const e of events) await deliver(e);
  for (const e of events) await settled(e.id);
  t.equal((await read()).statusCode, 200, 'pro: company reads work');

  const subscriptionId = (events[0]!.data.object as { id: string }).id;
  const before = stripeServer.events.length;
  await sdk.subscriptions.cancel(subscriptionId);
  for (const e of stripeServer.events.slice(before)) await deliver(e);
  for (const e of stripeServer.events.slice(before)) await settled(e.id);
  const refused = await read();
  t.equal(refused.statusCode, 402);
  t.equal(refused.json().code, 'plan_required');
  t.equal(refused.json().next_action, 'change_plan');
  t.equal(
    await direct.oneFirst(
      sql.type(
        z.object({ n: z.number() }),
      )`select count(*)::int as n from companies where tenant_id = ${registration.tenant_id}`,
    ),
    1,
    'the company is kept',
  );
  const caps = await app.inject({ url: '/api/agent/v1/capabilities', headers: { authorization: `Bearer ${token}` } });
  t.match(
    caps.json().next_actions.filter((a: { action: string }) => a.action !== 'complete_setup'),
    [{ action: 'change_plan', method: 'POST', endpoint: `${config.baseUrl}/api/billing/checkout` }],
    'capabilities point at the checkout route',
  );
});

t.test('agent slots: over the limit → 402 naming the add-on; the add-on raises the limit', async (t) => {
  const admin = await createMember(direct);
  t.equal(
    (await post(admin, '/api/billing/agent-addon')).json().error,
    'no_active_subscription',
    'no subscription → 409',
  );
  const events = await subscribe(admin);
  for (const e of events) await deliver(e);
  for (const e of events) await settled(e.id);
  for (let i = 0; i < 10; i++)
    await createManagedAgent(direct, { tenantId: admin.tenantId, name: `agent ${i}`, kind: 'standalone' });
  const create = () =>
    app.inject({
      method: 'POST',
      url: '/api/managed-agents',
      headers: tenantHeaders(admin),
      payload: { name: 'one too many' },
    });
  const over = await create();
  t.equal(over.statusCode, 402);
  t.equal(over.json().error, 'agent_addon_required');
  t.match(over.json().message, /agent-addon/);

  const bought = await post(admin, '/api/billing/agent-addon', { 'idempotency-key': 'buy-slot-0001' });
  t.equal(bought.statusCode, 200, bought.body);
  t.match(bought.json(), { agentSlots: { plan: 'pro', included: 10, addons: 1, used: 10 } });
  const retried = await post(admin, '/api/billing/agent-addon', { 'idempotency-key': 'buy-slot-0001' });
  t.equal(retried.json().agentSlots.addons, 1, 'a retried purchase with the same key buys nothing more');
  t.equal((await create()).statusCode, 201, 'the slot is usable at once');
  t.equal((await create()).statusCode, 402, 'and only one');
  t.match(await status(admin), { agentSlots: { included: 10, addons: 1, used: 11, available: 0 } });
});

t.test('events: unknown types are stored and ignored; unknown tenants too', async (t) => {
  const admin = await createMember(direct);
  const unknownType = {
    id: `evt_${randomUUID().slice(0, 12)}`,
    object: 'event',
    type: 'charge.refunded',
    created: Math.floor(Date.now() / 1000),
    livemode: false,
    data: { object: { id: 'ch_1', object: 'charge', metadata: { tenant_id: admin.tenantId } } },
  };
  t.same((await deliver(unknownType)).json(), { received: true, duplicate: false, status: 'ignored' });
  t.match(await eventRows(unknownType.id), [{ status: 'ignored', outcome: 'unhandled_type', job_id: null }]);
  const nobody = {
    ...unknownType,
    id: `evt_${randomUUID().slice(0, 12)}`,
    type: 'customer.subscription.updated',
    data: { object: { id: 'sub_x', object: 'subscription', customer: 'cus_nobody', metadata: {} } },
  };
  t.same((await deliver(nobody)).json().status, 'ignored');
  t.match(await eventRows(nobody.id), [{ status: 'ignored', outcome: 'unknown_tenant' }]);
});

t.test('enterprise checkout and the operator command share one plan', async (t) => {
  const admin = await createMember(direct);
  const events = await subscribe(admin, '/api/billing/checkout/enterprise');
  for (const e of events) await deliver(e);
  for (const e of events) await settled(e.id);
  t.equal(await planOf(admin.tenantId), 'enterprise');
  t.equal(
    (await post(admin, '/api/billing/checkout')).json().error,
    'already_on_plan',
    'pro is included in enterprise',
  );
});
