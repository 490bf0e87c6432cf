// The billing sandbox as the real stripe SDK sees it: over a local HTTP
// server (host/port/protocol) and in-process (createFetchHttpClient). Objects
// in PostgreSQL, idempotency keys, errors shaped as Stripe's, and the events
// a paid checkout and subscription changes emit.
import Stripe from 'stripe';
import t from 'tap';
import { z } from 'zod';
import { sql } from '../../../core/db/pool.ts';
import { createTestDatabase, testPool } from '../../helpers/db.ts';
import { startStripeServer } from '../../helpers/stripe-server.ts';

const databaseUrl = await createTestDatabase(t);
const db = await testPool(t, databaseUrl);
const server = await startStripeServer(t, db, { baseUrl: 'http://app.test' });
const local = new URL(server.url);
const sdkFor = (key: string) =>
  new Stripe(key, {
    host: local.hostname,
    port: Number(local.port),
    protocol: 'http',
    maxNetworkRetries: 0,
    telemetry: false,
  });
const stripe = sdkFor(server.secretKey);
const { prices } = server;

/** Events delivered while `fn` runs. */
async function eventsOf(fn: () => Promise<unknown>): Promise<Stripe.Event[]> {
  const before = server.events.length;
  await fn();
  return server.events.slice(before);
}

async function paidSubscription(metadata: Record<string, string> = { tenant_id: 't1' }) {
  const customer = await stripe.customers.create({ email: 'pay@example.test' });
  const session = await stripe.checkout.sessions.create({
    mode: 'subscription',
    customer: customer.id,
    line_items: [{ price: prices.pro, quantity: 1 }],
    success_url: 'http://app.test/billing/return?checkout=success&session={CHECKOUT_SESSION_ID}',
    cancel_url: 'http://app.test/billing/return?checkout=cancelled',
    subscription_data: { metadata },
  });
  await server.api.completeCheckout(session.id);
  const sub = (await stripe.subscriptions.list({ customer: customer.id })).data[0]!;
  return { customer, session, sub };
}

t.test('customers: create and retrieve', async (t) => {
  const created = await stripe.customers.create({
    email: 'a@example.test',
    name: 'Acme',
    metadata: { tenant_id: 'tenant-1' },
  });
  t.match(created.id, /^cus_[A-Za-z0-9]{24}$/);
  t.match(created, {
    object: 'customer',
    email: 'a@example.test',
    name: 'Acme',
    metadata: { tenant_id: 'tenant-1' },
    livemode: false,
  });
  t.ok(Math.abs(created.created - Date.now() / 1000) < 60, 'created in unix seconds');
  t.same(await stripe.customers.retrieve(created.id), created, 'retrieved as created');
  const other = await stripe.customers.create({});
  t.not(other.id, created.id, 'random ids');
});

t.test('idempotency keys: one customer per key, also under concurrency; another body is refused', async (t) => {
  const a = await stripe.customers.create({ name: 'Once' }, { idempotencyKey: 'key-sequential' });
  const replay = await stripe.customers.create({ name: 'Once' }, { idempotencyKey: 'key-sequential' });
  t.equal(replay.id, a.id, 'the stored answer again');
  t.equal(replay.lastResponse.headers['idempotent-replayed'], 'true');

  const [x, y] = await Promise.all([
    stripe.customers.create({ name: 'Race', metadata: { n: '1' } }, { idempotencyKey: 'key-concurrent' }),
    stripe.customers.create({ name: 'Race', metadata: { n: '1' } }, { idempotencyKey: 'key-concurrent' }),
  ]);
  t.equal(x.id, y.id, 'two racing requests, one customer');
  const stored = await db.oneFirst(sql.type(z.object({ n: z.number() }))`
    select count(*)::int as n from billing_sandbox_objects where object = 'customer' and data ->> 'name' = 'Race'`);
  t.equal(stored, 1);

  const conflict = await stripe.customers
    .create({ name: 'Something else' }, { idempotencyKey: 'key-sequential' })
    .catch((e: unknown) => e);
  t.ok(conflict instanceof Stripe.errors.StripeIdempotencyError, 'StripeIdempotencyError');
  t.match(conflict, { statusCode: 400, type: 'StripeIdempotencyError', message: /same parameters/ });

  // A refused request keeps no answer: the key works once the request is right.
  const refused = await stripe.customers
    .create({ email: 'x'.repeat(600) }, { idempotencyKey: 'key-after-error' })
    .catch((e: unknown) => e);
  t.ok(refused instanceof Stripe.errors.StripeInvalidRequestError);
  t.ok((await stripe.customers.create({ email: 'ok@example.test' }, { idempotencyKey: 'key-after-error' })).id);
});

t.test('checkout: session with a sandbox page URL; Pay creates the subscription and sends three events', async (t) => {
  const customer = await stripe.customers.create({ email: 'buyer@example.test' });
  const session = await stripe.checkout.sessions.create({
    mode: 'subscription',
    customer: customer.id,
    client_reference_id: 'tenant-42',
    line_items: [{ price: prices.pro, quantity: 1 }],
    success_url: 'http://app.test/billing/return?checkout=success',
    cancel_url: 'http://app.test/billing/return?checkout=cancelled',
    metadata: { tenant_id: 'tenant-42', plan: 'pro' },
    subscription_data: { metadata: { tenant_id: 'tenant-42', plan: 'pro' } },
  });
  t.match(session.id, /^cs_test_/);
  t.match(session, {
    object: 'checkout.session',
    status: 'open',
    payment_status: 'unpaid',
    subscription: null,
    customer: customer.id,
    amount_total: 2900,
    livemode: false,
  });
  t.equal(session.url, `http://app.test/billing/sandbox/checkout/${session.id}`);
  t.notOk('_sandbox' in session, 'internal fields stay inside');
  t.same(await stripe.checkout.sessions.retrieve(session.id), session);
  t.equal(
    (await server.api.cancelCheckout(session.id))?.redirect,
    'http://app.test/billing/return?checkout=cancelled',
    'Cancel goes back',
  );

  const events = await eventsOf(async () => {
    t.same(await server.api.completeCheckout(session.id), {
      redirect: 'http://app.test/billing/return?checkout=success',
    });
  });
  t.same(
    events.map((e) => e.type),
    ['customer.subscription.created', 'checkout.session.completed', 'invoice.paid'],
    'in this order',
  );
  for (const e of events) {
    t.match(e, {
      id: /^evt_/,
      object: 'event',
      api_version: Stripe.API_VERSION,
      livemode: false,
      pending_webhooks: 1,
      request: { id: null, idempotency_key: null },
    });
    t.ok(Number.isInteger(e.created));
  }
  const sub = events[0]!.data.object as Stripe.Subscription;
  t.match(sub, {
    id: /^sub_/,
    object: 'subscription',
    status: 'active',
    customer: customer.id,
    metadata: { tenant_id: 'tenant-42', plan: 'pro' },
    cancel_at_period_end: false,
    canceled_at: null,
    ended_at: null,
  });
  const [item] = sub.items.data;
  t.match(item, {
    id: /^si_/,
    object: 'subscription_item',
    quantity: 1,
    subscription: sub.id,
    price: { id: prices.pro, object: 'price', unit_amount: 2900, currency: 'usd', recurring: { interval: 'month' } },
  });
  const days = (item!.current_period_end - item!.current_period_start) / 86_400;
  t.ok(days >= 28 && days <= 31, `a month-long period (${days} days)`);
  t.match(events[1]!.data.object, {
    object: 'checkout.session',
    status: 'complete',
    payment_status: 'paid',
    subscription: sub.id,
    client_reference_id: 'tenant-42',
  });
  t.match(events[2]!.data.object, {
    id: /^in_/,
    object: 'invoice',
    customer: customer.id,
    status: 'paid',
    amount_paid: 2900,
    parent: {
      type: 'subscription_details',
      subscription_details: { subscription: sub.id, metadata: { tenant_id: 'tenant-42' } },
    },
  });
  t.same(await stripe.subscriptions.retrieve(sub.id), sub, 'the SDK reads what the event carried');
  t.match(await stripe.checkout.sessions.retrieve(session.id), { status: 'complete', subscription: sub.id });

  const again = await eventsOf(() => server.api.completeCheckout(session.id));
  t.same(again, [], 'paying twice creates nothing more');
  t.equal((await stripe.subscriptions.list({ customer: customer.id })).data.length, 1);
  t.equal(await server.api.completeCheckout('cs_test_doesnotexist'), null);
});

t.test('the success URL gets the session id; list filters by status', async (t) => {
  const { session, customer, sub } = await paidSubscription();
  const redirect = await server.api.completeCheckout(session.id);
  t.equal(redirect?.redirect, `http://app.test/billing/return?checkout=success&session=${session.id}`);
  const listed = await stripe.subscriptions.list({ customer: customer.id, status: 'active' });
  t.match(listed, { object: 'list', has_more: false, url: '/v1/subscriptions' });
  t.same(
    listed.data.map((s) => s.id),
    [sub.id],
  );
  t.same((await stripe.subscriptions.list({ customer: customer.id, status: 'canceled' })).data, []);
});

t.test(
  'subscription items: the add-on, a quantity change and a removal each send customer.subscription.updated',
  async (t) => {
    const { sub } = await paidSubscription();
    let item!: Stripe.SubscriptionItem;
    const added = await eventsOf(async () => {
      item = await stripe.subscriptionItems.create({
        subscription: sub.id,
        price: prices.agentAddon,
        quantity: 1,
        proration_behavior: 'create_prorations',
      });
    });
    t.match(item, {
      id: /^si_/,
      object: 'subscription_item',
      quantity: 1,
      subscription: sub.id,
      price: { id: prices.agentAddon, unit_amount: 900 },
    });
    t.equal(item.current_period_end, sub.items.data[0]!.current_period_end, 'joins the current period');
    t.same(
      added.map((e) => e.type),
      ['customer.subscription.updated'],
    );
    t.equal((added[0]!.data.object as Stripe.Subscription).items.data.length, 2);
    t.equal(
      (added[0]!.data.previous_attributes as { items: Stripe.ApiList<unknown> }).items.data.length,
      1,
      'previous_attributes holds the old items',
    );

    const updated = await eventsOf(async () => {
      t.equal(
        (await stripe.subscriptionItems.update(item.id, { quantity: 3, proration_behavior: 'create_prorations' }))
          .quantity,
        3,
      );
    });
    t.same(
      updated.map((e) => e.type),
      ['customer.subscription.updated'],
    );
    const current = await stripe.subscriptions.retrieve(sub.id);
    t.equal(current.items.data.find((i) => i.price.id === prices.agentAddon)?.quantity, 3);

    const duplicate = await stripe.subscriptionItems
      .create({ subscription: sub.id, price: prices.agentAddon })
      .catch((e: unknown) => e);
    t.match(duplicate, { type: 'StripeInvalidRequestError', message: /same price/ });

    const viaSubscription = await eventsOf(async () => {
      await stripe.subscriptions.update(sub.id, {
        metadata: { note: 'x' },
        cancel_at_period_end: true,
        items: [{ id: item.id, deleted: true }],
      });
    });
    const after = viaSubscription[0]!.data.object as Stripe.Subscription;
    t.same(
      after.items.data.map((i) => i.price.id),
      [prices.pro],
      'the add-on removed',
    );
    t.match(after, {
      cancel_at_period_end: true,
      cancel_at: current.items.data[0]!.current_period_end,
      metadata: { tenant_id: 't1', note: 'x' },
    });
    t.match(viaSubscription[0]!.data.previous_attributes, { cancel_at_period_end: false });
    t.same(await eventsOf(() => stripe.subscriptions.update(sub.id, {})), [], 'no change, no event');

    t.match(await stripe.subscriptionItems.del(after.items.data[0]!.id).catch((e: unknown) => e), {
      type: 'StripeInvalidRequestError',
      message: /at least one/,
    });
  },
);

t.test('cancel: DELETE ends the subscription and sends customer.subscription.deleted', async (t) => {
  const { sub, customer } = await paidSubscription();
  let canceled!: Stripe.Subscription;
  const events = await eventsOf(async () => {
    canceled = await stripe.subscriptions.cancel(sub.id);
  });
  t.match(canceled, { id: sub.id, status: 'canceled', canceled_at: Number, ended_at: Number });
  t.same(
    events.map((e) => e.type),
    ['customer.subscription.deleted'],
  );
  t.match(events[0]!.data.object, { id: sub.id, status: 'canceled' });
  t.match(events[0]!.request, { id: /^req_/ }, 'names the API request that caused it');
  t.same(
    (await stripe.subscriptions.list({ customer: customer.id })).data,
    [],
    'the default list leaves canceled ones out',
  );
  t.equal((await stripe.subscriptions.list({ customer: customer.id, status: 'all' })).data.length, 1);
  t.match(
    await stripe.subscriptions.update(sub.id, { items: [{ price: prices.agentAddon }] }).catch((e: unknown) => e),
    { type: 'StripeInvalidRequestError' },
  );

  // The portal's button: only its customer's subscriptions, cancel sends the same event.
  const second = await paidSubscription();
  t.same(
    (await server.api.subscriptionsOf(second.customer.id)).map((s) => s.id),
    [second.sub.id],
  );
  const portal = await stripe.billingPortal.sessions.create({
    customer: second.customer.id,
    return_url: 'http://app.test/billing/return?portal=done',
  });
  t.match(portal, {
    id: /^bps_/,
    object: 'billing_portal.session',
    url: `http://app.test/billing/sandbox/portal/${portal.id}`,
    customer: second.customer.id,
  });
  t.match(await server.api.portalSession(portal.id), {
    customer: second.customer.id,
    return_url: 'http://app.test/billing/return?portal=done',
  });
  const fromPortal = await eventsOf(async () =>
    t.match(await server.api.cancelSubscription(second.sub.id), { status: 'canceled' }),
  );
  t.same(
    fromPortal.map((e) => e.type),
    ['customer.subscription.deleted'],
  );
  t.same(await eventsOf(() => server.api.cancelSubscription(second.sub.id)), [], 'already canceled: nothing more');
  t.equal(await server.api.cancelSubscription('sub_unknown'), null);
});

t.test('errors as Stripe answers them', async (t) => {
  const badKey = await sdkFor('sk_test_wrongwrongwrongwrong1234')
    .customers.create({})
    .catch((e: unknown) => e);
  t.ok(badKey instanceof Stripe.errors.StripeAuthenticationError, 'StripeAuthenticationError');
  t.match(badKey, { statusCode: 401, message: /^Invalid API Key provided: sk_test_\*+1234$/ });
  t.notMatch((badKey as Error).message, /wrongwrong/, 'the key is not echoed');

  const customer = await stripe.customers.create({});
  const unknownPrice = await stripe.checkout.sessions
    .create({
      mode: 'subscription',
      customer: customer.id,
      line_items: [{ price: 'price_nope', quantity: 1 }],
      success_url: 'http://app.test/ok',
    })
    .catch((e: unknown) => e);
  t.ok(unknownPrice instanceof Stripe.errors.StripeInvalidRequestError, 'StripeInvalidRequestError');
  t.match(unknownPrice, {
    statusCode: 400,
    code: 'resource_missing',
    param: 'line_items[0][price]',
    message: /price_nope/,
  });

  const missing = await stripe.subscriptions.retrieve('sub_doesnotexist').catch((e: unknown) => e);
  t.ok(missing instanceof Stripe.errors.StripeInvalidRequestError);
  t.match(missing, { statusCode: 404, code: 'resource_missing', message: "No such subscription: 'sub_doesnotexist'" });
  t.match(await stripe.subscriptionItems.update('si_doesnotexist', { quantity: 2 }).catch((e: unknown) => e), {
    statusCode: 404,
    code: 'resource_missing',
  });
  t.match(
    await stripe.checkout.sessions
      .create({ mode: 'payment', line_items: [{ price: prices.pro }], success_url: 'http://app.test/ok' })
      .catch((e: unknown) => e),
    { statusCode: 400, param: 'mode' },
  );
  t.match(await stripe.customers.create({ nmae: 'typo' } as never).catch((e: unknown) => e), {
    statusCode: 400,
    message: 'Received unknown parameter: nmae',
  });
  t.match(await stripe.billingPortal.sessions.create({ customer: 'cus_nobody' }).catch((e: unknown) => e), {
    statusCode: 400,
    code: 'resource_missing',
    param: 'customer',
  });

  const raw = await server.api.fetch(`${server.url}/v1/nothing/here`, {
    headers: { authorization: `Bearer ${server.secretKey}` },
  });
  t.equal(raw.status, 404);
  t.match(await raw.json(), { error: { type: 'invalid_request_error', message: /Unrecognized request URL/ } });
});

t.test('in-process: the SDK with the sandbox as its fetch works the same', async (t) => {
  const inProcess = new Stripe(server.secretKey, {
    httpClient: Stripe.createFetchHttpClient(server.api.fetch),
    maxNetworkRetries: 0,
    telemetry: false,
  });
  const created = await inProcess.customers.create({ name: 'In process', metadata: { tenant_id: 'x' } });
  t.match(created, { id: /^cus_/, object: 'customer', name: 'In process' });
  t.same(await inProcess.customers.retrieve(created.id), created);
  t.same(await stripe.customers.retrieve(created.id), created, 'one store for both');
});

t.test(
  'PostgreSQL away: the sandbox answers 503 with its own code, and a checkout reads it as an outage (503), not as Stripe failing (502)',
  async (t) => {
    const { createDatabasePool } = await import('../../../core/db/pool.ts');
    const { SandboxStripeApi } = await import('../../../core/billing/sandbox/stripe-api.ts');
    const { isDatabaseUnavailable } = await import('../../../core/db/unavailable.ts');
    // A real pool whose database is cut off (a TCP proxy refusing and dropping connections).
    const { startTcpProxy } = await import('../../api/routes/ws/tcp-proxy.ts');
    const proxy = await startTcpProxy(databaseUrl);
    t.teardown(() => proxy.close());
    const away = await createDatabasePool(proxy.url, { maximumPoolSize: 1 });
    t.teardown(() => away.end().catch(() => undefined));
    await proxy.cut();
    const sandbox = new SandboxStripeApi(away, { baseUrl: 'http://app.test', secretKey: server.secretKey, prices });
    const sdk = new Stripe(server.secretKey, {
      httpClient: Stripe.createFetchHttpClient(sandbox.fetch),
      maxNetworkRetries: 0,
      telemetry: false,
    });
    const error = await sdk.customers.create({ email: 'x@example.test' }).then(
      () => null,
      (e: unknown) => e as { statusCode?: number; code?: string },
    );
    t.equal(error?.statusCode, 503);
    t.equal(error?.code, 'sandbox_database_unavailable');
    // ensureCustomer (core/billing/checkout.ts) makes of it an error the api answers 503 for.
    const { ensureCustomer } = await import('../../../core/billing/checkout.ts');
    const refused = await ensureCustomer(
      { db, config: {} as never, stripe: sdk },
      { id: '00000000-0000-4000-8000-0000000000aa', name: 'Acme' },
      null,
    ).then(
      () => null,
      (e: unknown) => e,
    );
    t.ok(isDatabaseUnavailable(refused), 'an outage, answered 503 with Retry-After');
    t.notMatch(String((refused as Error).message), /Stripe refused/);
  },
);
