// In-app purchases end to end: the api and a real worker read subscribers
// from a local server that speaks the provider's v1 API (app user id = tenant
// id); webhooks carry the bearer secret and are applied by the billing.webhook
// job, which re-reads the subscriber.
import { randomUUID } from 'node:crypto';
import t from 'tap';
import { z } from 'zod';
import { signPlatformToken } from '../../../../core/auth/platform-token.ts';
import { applyPurchaseEvent, entitlementFromSubscriber, fetchSubscriber } from '../../../../core/billing/purchase.ts';
import { finishEvent, loadEvent } from '../../../../core/billing/events.ts';
import { sql } from '../../../../core/db/pool.ts';
import { PermanentJobError, RetryableJobError } from '../../../../core/jobs/errors.ts';
import { createManagedAgent } from '../../../../core/managed-agents/managed-agents.ts';
import { buildTestApp } from '../../../helpers/app.ts';
import { TEST_SECRET, testLogger } from '../../../helpers/config.ts';
import { createTestDatabase, testPool } from '../../../helpers/db.ts';
import { createMember, type Member } from '../../../helpers/fixtures.ts';
import { startPurchaseServer, subscriberWith } from '../../../helpers/purchase-server.ts';
import { waitFor } from '../../../helpers/wait.ts';
import { startTestWorker } from '../../../helpers/worker.ts';

const databaseUrl = await createTestDatabase(t);
const direct = await testPool(t, databaseUrl);
const provider = await startPurchaseServer(t);
const WEBHOOK_SECRET = 'purchase-webhook-secret-for-tests-0123456789';
const env = {
  PURCHASE_API_BASE: provider.url,
  PURCHASE_API_KEY: provider.apiKey,
  PURCHASE_WEBHOOK_SECRET: WEBHOOK_SECRET,
};
// Logs at info, kept in memory: the secret must never appear in them.
const { app, config, logs } = await buildTestApp(t, databaseUrl, { ...env, LOG_LEVEL: 'info' });
await startTestWorker(t, databaseUrl, env);

const DAY = 86_400_000;
const inDays = (n: number) => new Date(Date.now() + n * DAY);
const headersOf = (m: { tenantId: string; token: string }) => ({
  authorization: `Bearer ${m.token}`,
  'x-tenant-id': m.tenantId,
});
const sync = (m: { tenantId: string; token: string }, payload?: unknown) =>
  app.inject({
    method: 'POST',
    url: '/api/billing/purchase-sync',
    headers: headersOf(m),
    ...(payload === undefined ? {} : { payload: payload as object }),
  });
const billingStatus = async (m: Member) =>
  (await app.inject({ url: '/api/billing/status', headers: headersOf(m) })).json();

const TenantRow = z.object({ plan: z.string(), plan_status: z.string(), plan_source: z.string().nullable() });
const tenantRow = (tenantId: string) =>
  direct.one(sql.type(TenantRow)`select plan, plan_status, plan_source from tenants where id = ${tenantId}`);
const EventRowView = z.object({
  status: z.string(),
  outcome: z.string().nullable(),
  job_id: z.string().nullable(),
  tenant_id: z.string().nullable(),
});
const eventRows = (eventId: string) =>
  direct.any(
    sql.type(
      EventRowView,
    )`select status, outcome, job_id, tenant_id from billing_events where provider = 'purchase' and event_id = ${eventId}`,
  );
const settled = (eventId: string) =>
  waitFor(`purchase event ${eventId} to be processed`, async () => {
    const [row] = await eventRows(eventId);
    return row && row.status !== 'queued' ? row : null;
  });

async function addMember(tenantId: string, role: 'admin' | 'viewer'): Promise<Member> {
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

/** A provider webhook body (RevenueCat shape). */
function providerEvent(type: string, appUserId: string | null, extra: Record<string, unknown> = {}) {
  return {
    api_version: '1.0',
    event: {
      id: randomUUID().toUpperCase(),
      type,
      ...(appUserId === null ? {} : { app_user_id: appUserId, original_app_user_id: appUserId, aliases: [appUserId] }),
      event_timestamp_ms: Date.now(),
      product_id: 'com.example.pro.monthly',
      entitlement_ids: ['pro'],
      period_type: 'NORMAL',
      store: 'APP_STORE',
      environment: 'SANDBOX',
      ...extra,
    },
  };
}

/** An event row as the webhook stores it, but without a job: the test applies it itself. */
async function storedWithoutJob(body: ReturnType<typeof providerEvent>, tenantId: string) {
  const id = await direct.oneFirst(sql.type(z.object({ id: z.string() }))`
    insert into billing_events (provider, event_id, type, tenant_id, event_created, payload)
    values ('purchase', ${body.event.id}, ${body.event.type}, ${tenantId}, now(), ${sql.jsonb(body)})
    returning id`);
  return (await loadEvent(direct, id))!;
}

const deliver = (body: unknown, authorization: string | null = `Bearer ${WEBHOOK_SECRET}`) =>
  app.inject({
    method: 'POST',
    url: '/api/billing/purchase-webhook',
    headers: { 'content-type': 'application/json', ...(authorization === null ? {} : { authorization }) },
    payload: JSON.stringify(body),
  });

t.test('sync: Admin only, tenant-checked; an active pro entitlement makes the workspace pro', async (t) => {
  const admin = await createMember(direct);
  const viewer = await addMember(admin.tenantId, 'viewer');
  const stranger = await createMember(direct);
  const expires = inDays(30);
  provider.setSubscriber(
    admin.tenantId,
    subscriberWith({ entitlement: 'pro', product: 'com.example.pro.monthly', expires }),
  );

  const before = provider.requests;
  t.equal((await sync(viewer)).statusCode, 403, 'Viewer');
  const foreign = await sync({ tenantId: admin.tenantId, token: stranger.token });
  t.equal(foreign.statusCode, 404, "another tenant's id reads as absent");
  t.equal(foreign.json().error, 'not_found');
  t.equal(provider.requests, before, 'refused requests never reach the provider');
  t.equal((await sync(admin, { plan: 'enterprise' })).statusCode, 400, 'the body carries nothing');

  const res = await sync(admin);
  t.equal(res.statusCode, 200, res.body);
  t.same(res.json(), {
    plan: 'pro',
    status: 'active',
    source: 'in_app',
    expiresAt: expires.toISOString(),
    entitlement: {
      id: 'pro',
      productId: 'com.example.pro.monthly',
      currentPeriodEnd: expires.toISOString(),
      willRenew: true,
      stored: 'applied',
    },
    tenantPlan: 'pro',
  });
  t.equal(provider.requests, before + 1, 'one provider read');
  t.same(await tenantRow(admin.tenantId), { plan: 'pro', plan_status: 'active', plan_source: 'in_app' });
  t.match(await billingStatus(admin), {
    plan: 'pro',
    status: 'active',
    source: 'in_app',
    periodEnd: expires.toISOString(),
    limits: { companyWork: true },
  });
  t.equal((await sync(admin, {})).statusCode, 200, 'an empty JSON body is fine too');
  const changes = await direct.any(sql.type(
    z.object({ from_plan: z.string(), to_plan: z.string(), source: z.string().nullable(), reason: z.string() }),
  )`
    select from_plan, to_plan, source, reason from billing_changes where tenant_id = ${admin.tenantId}`);
  t.match(
    changes,
    [{ from_plan: 'free', to_plan: 'pro', source: 'in_app', reason: /^in-app sync by user / }],
    'one recorded change',
  );
  t.same(
    await tenantRow(stranger.tenantId),
    { plan: 'free', plan_status: 'active', plan_source: null },
    'the other tenant is untouched',
  );
});

t.test('sync with nothing bought: nothing stored, the workspace stays free and active', async (t) => {
  const admin = await createMember(direct);
  const res = await sync(admin);
  t.equal(res.statusCode, 200, res.body);
  t.match(res.json(), {
    plan: 'free',
    status: 'canceled',
    source: 'in_app',
    expiresAt: null,
    entitlement: { id: null, stored: 'none' },
    tenantPlan: 'free',
  });
  t.same(await tenantRow(admin.tenantId), { plan: 'free', plan_status: 'active', plan_source: null });
  const rows = await direct.oneFirst(
    sql.type(
      z.object({ n: z.number() }),
    )`select count(*)::int as n from billing_entitlements where tenant_id = ${admin.tenantId}`,
  );
  t.equal(rows, 0);
});

t.test('entitlements: the highest active one wins; lifetime, grace, billing issue, trial, expiry', async (t) => {
  const now = new Date();
  const pro = subscriberWith({ entitlement: 'pro', product: 'pro.monthly', expires: inDays(10) });
  const both = {
    entitlements: {
      ...pro.entitlements,
      enterprise: { expires_date: null, purchase_date: now.toISOString(), product_identifier: 'enterprise.lifetime' },
    },
    subscriptions: pro.subscriptions,
  };
  t.match(entitlementFromSubscriber(config, both as never, now), {
    plan: 'enterprise',
    status: 'active',
    expiresAt: null,
    currentPeriodEnd: null,
    externalRef: 'enterprise.lifetime',
    willRenew: null,
  });
  t.match(entitlementFromSubscriber(config, pro as never, now), {
    plan: 'pro',
    status: 'active',
    externalRef: 'pro.monthly',
    willRenew: true,
  });

  const grace = subscriberWith({
    entitlement: 'pro',
    expires: inDays(-1),
    graceUntil: inDays(5),
    billingIssueAt: inDays(-1),
  });
  const inGrace = entitlementFromSubscriber(config, grace as never, now);
  t.match(inGrace, { plan: 'pro', status: 'past_due' }, 'billing issue in grace: still pro, past_due');
  t.equal(
    inGrace.expiresAt?.getTime(),
    new Date(grace.entitlements!.pro!.grace_period_expires_date!).getTime(),
    'ends with the grace period',
  );
  t.match(
    entitlementFromSubscriber(
      config,
      subscriberWith({ entitlement: 'pro', expires: inDays(3), billingIssueAt: inDays(-1) }) as never,
      now,
    ),
    { plan: 'pro', status: 'past_due' },
  );
  t.match(
    entitlementFromSubscriber(
      config,
      subscriberWith({ entitlement: 'pro', expires: inDays(3), periodType: 'trial' }) as never,
      now,
    ),
    { plan: 'pro', status: 'trialing' },
  );
  t.match(
    entitlementFromSubscriber(
      config,
      subscriberWith({ entitlement: 'pro', expires: inDays(3), unsubscribedAt: inDays(-1) }) as never,
      now,
    ),
    { plan: 'pro', status: 'active', willRenew: false },
    'auto-renew off: active until the end',
  );

  const expiredAt = inDays(-2);
  t.match(
    entitlementFromSubscriber(
      config,
      subscriberWith({ entitlement: 'pro', product: 'pro.monthly', expires: expiredAt }) as never,
      now,
    ),
    {
      plan: 'free',
      status: 'canceled',
      expiresAt: expiredAt,
      externalRef: 'pro.monthly',
      entitlementId: 'pro',
    },
  );
  t.match(
    entitlementFromSubscriber(
      config,
      subscriberWith({ entitlement: 'something_else', expires: inDays(3) }) as never,
      now,
    ),
    { plan: 'free', status: 'canceled', entitlementId: null },
    'entitlements not ours grant nothing',
  );
});

t.test(
  'provider errors: not configured → 503, unreachable → 502, wrong key is permanent, outages are retried',
  async (t) => {
    const admin = await createMember(direct);
    provider.setSubscriber(admin.tenantId, subscriberWith({ entitlement: 'pro', expires: inDays(30) }));

    const bare = await buildTestApp(t, databaseUrl, { PURCHASE_API_BASE: provider.url });
    const unconfigured = await bare.app.inject({
      method: 'POST',
      url: '/api/billing/purchase-sync',
      headers: headersOf(admin),
    });
    t.equal(unconfigured.statusCode, 503);
    t.match(unconfigured.json(), { error: 'billing_not_configured', status: 503, message: /PURCHASE_API_KEY/ });
    const noSecret = await bare.app.inject({
      method: 'POST',
      url: '/api/billing/purchase-webhook',
      headers: { authorization: `Bearer ${WEBHOOK_SECRET}` },
      payload: providerEvent('RENEWAL', admin.tenantId),
    });
    t.equal(noSecret.statusCode, 503);
    t.match(noSecret.json(), { error: 'billing_not_configured', message: /PURCHASE_WEBHOOK_SECRET/ });

    provider.failWith(503);
    const down = await sync(admin);
    t.equal(down.statusCode, 502);
    t.match(down.json(), { error: 'purchase_provider_unavailable', status: 502 });
    provider.failWith(null);
    t.equal((await tenantRow(admin.tenantId)).plan, 'free', 'nothing changed');

    const wrongKey = {
      ...config,
      billing: { ...config.billing, purchase: { ...config.billing.purchase, apiKey: 'sk_wrong' } },
    };
    await t.rejects(fetchSubscriber(wrongKey, admin.tenantId), {
      name: 'PurchaseProviderError',
      kind: 'unauthorized',
      code: 'purchase_provider_auth_failed',
    });
    const closed = {
      ...config,
      billing: { ...config.billing, purchase: { ...config.billing.purchase, apiBase: 'http://127.0.0.1:9' } },
    };
    await t.rejects(fetchSubscriber(closed, admin.tenantId), {
      kind: 'unavailable',
      code: 'purchase_provider_unavailable',
    });
    t.ok(
      (await fetchSubscriber(config, admin.tenantId))?.subscriber.entitlements.pro,
      'the right key reads the subscriber',
    );
    t.equal(await fetchSubscriber(config, randomUUID()), null, 'an unknown app user is null (404)');

    // The job's view: stored event, provider refusing → job errors with codes, event left queued for the retry.
    const row = await storedWithoutJob(providerEvent('RENEWAL', admin.tenantId), admin.tenantId);
    const deps = { db: direct, config, logger: testLogger('purchase') };
    const finish = async () => {
      t.fail('finish must not be called when the provider fails');
    };
    await t.rejects(applyPurchaseEvent({ ...deps, config: wrongKey }, row, finish), PermanentJobError);
    await t.rejects(applyPurchaseEvent({ ...deps, config: wrongKey }, row, finish), {
      code: 'purchase_provider_auth_failed',
    });
    await t.rejects(applyPurchaseEvent({ ...deps, config: closed }, row, finish), RetryableJobError);
    await t.rejects(applyPurchaseEvent({ ...deps, config: bare.config }, row, finish), {
      name: 'PermanentJobError',
      code: 'billing_not_configured',
    });
  },
);

t.test('webhook: a wrong or missing bearer secret → 401 and nothing stored; the secret is never logged', async (t) => {
  const admin = await createMember(direct);
  const body = providerEvent('RENEWAL', admin.tenantId);
  const cases: [string, string | null][] = [
    ['missing', null],
    ['wrong secret', 'Bearer not-the-secret-at-all-0123456789'],
    ['a prefix of the secret', `Bearer ${WEBHOOK_SECRET.slice(0, 20)}`],
    ['the secret without Bearer', WEBHOOK_SECRET],
    ['another scheme', `Basic ${WEBHOOK_SECRET}`],
    ['empty bearer', 'Bearer '],
  ];
  for (const [what, authorization] of cases) {
    const res = await deliver(body, authorization);
    t.equal(res.statusCode, 401, what);
    t.match(res.json(), { error: 'unauthorized', status: 401 }, `${what}: platform error shape`);
  }
  t.same(await eventRows(body.event.id), [], 'nothing stored');
  const garbage = await app.inject({
    method: 'POST',
    url: '/api/billing/purchase-webhook',
    headers: { 'content-type': 'application/json' },
    payload: '{"not json',
  });
  t.equal(garbage.statusCode, 401, 'unauthorized before the body is even read');

  const invalid = await deliver({ api_version: '1.0', event: { type: 'RENEWAL', app_user_id: admin.tenantId } });
  t.equal(invalid.statusCode, 400, 'authorized but not an event');
  t.match(invalid.json(), { error: 'invalid_request', details: [{ path: /^body\.event/ }] });

  t.ok((await deliver(body)).statusCode === 200, 'the right secret is accepted');
  t.notMatch(logs(), WEBHOOK_SECRET, 'the secret is not in the logs');
  t.notMatch(logs(), 'not-the-secret-at-all', 'nor a wrong one');
  t.notMatch(logs(), provider.apiKey, 'nor the provider API key');
  t.match(logs(), /in-app purchase webhook refused/, 'refusals are logged (without the header)');
});

t.test('RENEWAL webhook: stored once, one job, applied by the worker from the provider state', async (t) => {
  const admin = await createMember(direct);
  const expires = inDays(31);
  provider.setSubscriber(admin.tenantId, subscriberWith({ entitlement: 'pro', expires }));
  const body = providerEvent('RENEWAL', admin.tenantId);

  const first = await deliver(body);
  t.equal(first.statusCode, 200, first.body);
  t.same(first.json(), { received: true, duplicate: false, status: 'queued' });
  const again = await deliver(body);
  t.equal(again.statusCode, 200);
  t.equal(again.json().duplicate, true, 'the same event id again is a duplicate');

  t.match(await settled(body.event.id), { status: 'applied', outcome: 'pro active', tenant_id: admin.tenantId });
  t.equal((await eventRows(body.event.id)).length, 1, 'one row');
  const jobs = await direct.oneFirst(sql.type(z.object({ n: z.number() }))`
    select count(*)::int as n from jobs where tenant_id = ${admin.tenantId} and kind = 'billing.webhook'`);
  t.equal(jobs, 1, 'one job');
  t.same(await tenantRow(admin.tenantId), { plan: 'pro', plan_status: 'active', plan_source: 'in_app' });
  t.equal((await billingStatus(admin)).plan, 'pro');
  t.equal((await deliver(body)).json().duplicate, true, 'still a duplicate after it was applied');
});

t.test('EXPIRATION: back to free, canceled, data kept; a late older event changes nothing', async (t) => {
  const admin = await createMember(direct);
  provider.setSubscriber(admin.tenantId, subscriberWith({ entitlement: 'pro', expires: inDays(30) }));
  const purchase = providerEvent('INITIAL_PURCHASE', admin.tenantId, { event_timestamp_ms: Date.now() - 60_000 });
  await deliver(purchase);
  t.equal((await settled(purchase.event.id)).status, 'applied');
  t.equal((await tenantRow(admin.tenantId)).plan, 'pro');
  const agent = await createManagedAgent(direct, { tenantId: admin.tenantId, name: 'kept', kind: 'standalone' });

  // The store ended the subscription: the provider now has it expired.
  const ended = inDays(-0.01);
  provider.setSubscriber(
    admin.tenantId,
    subscriberWith({ entitlement: 'pro', expires: ended, unsubscribedAt: inDays(-3) }),
  );
  const expiration = providerEvent('EXPIRATION', admin.tenantId, { expiration_reason: 'UNSUBSCRIBE' });
  t.equal((await deliver(expiration)).statusCode, 200);
  t.match(await settled(expiration.event.id), { status: 'applied', outcome: 'free canceled' });
  t.same(await tenantRow(admin.tenantId), { plan: 'free', plan_status: 'canceled', plan_source: 'in_app' });
  t.match(await billingStatus(admin), { plan: 'free', status: 'canceled', source: 'in_app', periodEnd: null });
  const agents = await direct.oneFirst(sql.type(z.object({ n: z.number() }))`
    select count(*)::int as n from managed_agents where tenant_id = ${admin.tenantId} and id = ${agent.id} and status = 'active'`);
  t.equal(agents, 1, 'the workspace data is kept');

  // A purchase event from before the expiration, delivered late: the job re-reads the provider, which says expired.
  const late = providerEvent('RENEWAL', admin.tenantId, { event_timestamp_ms: Date.now() - 3_600_000 });
  await deliver(late);
  await settled(late.event.id);
  t.same(
    await tenantRow(admin.tenantId),
    { plan: 'free', plan_status: 'canceled', plan_source: 'in_app' },
    'still free',
  );
  const changes = await direct.anyFirst(sql.type(z.object({ to_plan: z.string() }))`
    select to_plan from billing_changes where tenant_id = ${admin.tenantId} order by id`);
  t.same(changes, ['pro', 'free']);
});

t.test('a slower read never puts an older state back over a newer one', async (t) => {
  const admin = await createMember(direct);
  provider.setSubscriber(admin.tenantId, subscriberWith({ entitlement: 'pro', expires: inDays(-1) }));
  const body = providerEvent('EXPIRATION', admin.tenantId);
  const row = await storedWithoutJob(body, admin.tenantId);
  // Stored state read "in the future" (a newer read by another process): pro.
  await direct.query(sql.unsafe`
    insert into billing_entitlements (tenant_id, source, plan, status, expires_at, last_event_at)
    values (${admin.tenantId}, 'in_app', 'pro', 'active', now() + interval '30 days', now() + interval '1 hour')`);
  await direct.query(sql.unsafe`select billing_refresh_plan(${admin.tenantId}, 'test')`);
  const outcome = await applyPurchaseEvent({ db: direct, config, logger: testLogger('purchase') }, row, (tx, o) =>
    finishEvent(tx, row.id, o.status, o.outcome),
  );
  t.same(outcome, { status: 'ignored', outcome: 'older_than_state' });
  t.match(
    await eventRows(body.event.id),
    [{ status: 'ignored', outcome: 'older_than_state' }],
    'finished in the same transaction',
  );
  t.equal((await tenantRow(admin.tenantId)).plan, 'pro', 'the newer state stays');
});

t.test('events about no known tenant, and unhandled types, are stored as ignored', async (t) => {
  const admin = await createMember(direct);
  for (const appUserId of ['$RCAnonymousID:8069238d6049ce87cc529853916d624c', randomUUID()]) {
    const body = providerEvent('INITIAL_PURCHASE', appUserId);
    const res = await deliver(body);
    t.equal(res.statusCode, 200);
    t.same(res.json(), { received: true, duplicate: false, status: 'ignored' });
    t.same(
      await eventRows(body.event.id),
      [{ status: 'ignored', outcome: 'unknown_tenant', job_id: null, tenant_id: null }],
      appUserId,
    );
  }
  const test = providerEvent('TEST', admin.tenantId);
  t.same((await deliver(test)).json(), { received: true, duplicate: false, status: 'ignored' });
  t.match(await eventRows(test.event.id), [
    { status: 'ignored', outcome: 'unhandled_type', job_id: null, tenant_id: admin.tenantId },
  ]);

  // The job ignores them too, should one reach it.
  const row = (
    await direct.one(
      sql.type(z.object({ id: z.string() }))`select id from billing_events where event_id = ${test.event.id}`,
    )
  ).id;
  const event = (await loadEvent(direct, row))!;
  const outcome = await applyPurchaseEvent({ db: direct, config, logger: testLogger('purchase') }, event, (tx, o) =>
    finishEvent(tx, event.id, o.status, o.outcome),
  );
  t.same(outcome, { status: 'ignored', outcome: 'unhandled_type' });
});

t.test('TRANSFER: purchases moved to another workspace; both are re-read', async (t) => {
  const from = await createMember(direct);
  const to = await createMember(direct);
  provider.setSubscriber(from.tenantId, subscriberWith({ entitlement: 'pro', expires: inDays(20) }));
  t.equal((await sync(from)).json().tenantPlan, 'pro');

  // Restored in the other workspace: the provider moved the entitlement.
  provider.setSubscriber(from.tenantId, { entitlements: {}, subscriptions: {} });
  provider.setSubscriber(to.tenantId, subscriberWith({ entitlement: 'pro', expires: inDays(20) }));
  const body = {
    api_version: '1.0',
    event: {
      id: randomUUID(),
      type: 'TRANSFER',
      event_timestamp_ms: Date.now(),
      store: 'APP_STORE',
      environment: 'SANDBOX',
      transferred_from: [from.tenantId],
      transferred_to: [to.tenantId],
    },
  };
  const res = await deliver(body);
  t.same(res.json(), { received: true, duplicate: false, status: 'queued' });
  const row = await settled(body.event.id);
  t.match(row, { status: 'applied', tenant_id: to.tenantId });
  t.equal((await tenantRow(to.tenantId)).plan, 'pro', 'the receiving workspace is pro');
  t.same(
    await tenantRow(from.tenantId),
    { plan: 'free', plan_status: 'canceled', plan_source: 'in_app' },
    'the giving one is not any more',
  );
});

t.test('OpenAPI: both operations, the webhook with its bearer scheme', async (t) => {
  const doc = (await app.inject({ url: '/openapi.json' })).json();
  const syncOp = doc.paths['/api/billing/purchase-sync'].post;
  t.equal(syncOp.operationId, 'syncInAppPurchases');
  t.same(syncOp.security, [{ PlatformJWT: [] }]);
  t.ok(doc.components.schemas.PurchaseSyncResult, 'PurchaseSyncResult schema');
  const hook = doc.paths['/api/billing/purchase-webhook'].post;
  t.equal(hook.operationId, 'receivePurchaseWebhook');
  t.same(hook.security, [{ PurchaseWebhookBearer: [] }]);
  t.ok(doc.components.securitySchemes.PurchaseWebhookBearer);
});
