// The billing sandbox's pages: checkout (Pay, Cancel), the customer portal
// (cancel a subscription), and the return page. Sessions are made with the
// app's own in-process SDK, as the billing routes make them.
import t from 'tap';
import { sql } from '../../../../core/db/pool.ts';
import { buildTestApp } from '../../../helpers/app.ts';
import { createTestDatabase } from '../../../helpers/db.ts';

const databaseUrl = await createTestDatabase(t);
const { app, db, config } = await buildTestApp(t, databaseUrl, { NODE_ENV: 'development' });
const stripe = app.billing.stripe();
const { prices } = config.billing.stripe;
const form = { 'content-type': 'application/x-www-form-urlencoded' };
const SUCCESS = 'http://app.test/done?checkout=success';
const CANCEL = 'http://app.test/done?checkout=cancelled';

async function checkout() {
  const customer = await stripe.customers.create({ email: 'page@example.test' });
  const session = await stripe.checkout.sessions.create({
    mode: 'subscription',
    customer: customer.id,
    line_items: [{ price: prices.pro, quantity: 1 }],
    success_url: SUCCESS,
    cancel_url: CANCEL,
  });
  return { customer, session, path: new URL(session.url!).pathname };
}

t.test('checkout page: plan and price, Pay and Cancel as forms, a sandbox notice', async (t) => {
  t.equal(config.billing.mode, 'sandbox');
  const { session, path } = await checkout();
  t.equal(path, `/billing/sandbox/checkout/${session.id}`);
  const page = await app.inject({ url: path });
  t.equal(page.statusCode, 200);
  t.match(page.headers['content-type'], /^text\/html/);
  t.match(
    page.headers['content-security-policy'],
    /form-action 'self' http:\/\/app\.test;/,
    'the form may lead on to the app',
  );
  t.match(page.body, 'Billing sandbox — no real payment');
  t.match(page.body, /Pro<\/td><td>1<\/td><td>\$29\.00 \/ month/);
  t.match(page.body, `<form method="post" action="${path}/pay">`);
  t.match(page.body, `<form method="post" action="${path}/cancel">`);
  t.notMatch(page.body, /<script|https?:\/\/(?!app\.test)/, 'no scripts, no outside assets');

  const cancel = await app.inject({ method: 'POST', url: `${path}/cancel`, headers: form, payload: '' });
  t.equal(cancel.statusCode, 303);
  t.equal(cancel.headers.location, CANCEL);

  const pay = await app.inject({ method: 'POST', url: `${path}/pay`, headers: form, payload: '' });
  t.equal(pay.statusCode, 303);
  t.equal(pay.headers.location, SUCCESS);
  t.match(await stripe.checkout.sessions.retrieve(session.id), { status: 'complete', subscription: /^sub_/ });
  const again = await app.inject({ method: 'POST', url: `${path}/pay` });
  t.equal(again.headers.location, SUCCESS, 'a second Pay (no body at all) lands on the same page');
  t.equal(
    (await stripe.subscriptions.list({ customer: session.customer as string })).data.length,
    1,
    'and buys nothing more',
  );
  const paid = await app.inject({ url: path });
  t.equal(paid.statusCode, 200);
  t.match(paid.body, /already paid/i);
  t.notMatch(paid.body, /\/pay"/, 'no Pay button any more');
});

t.test('unknown, malformed and expired links answer a 404 page', async (t) => {
  for (const url of [
    '/billing/sandbox/checkout/cs_test_doesnotexist',
    '/billing/sandbox/checkout/NOT-AN-ID',
    '/billing/sandbox/portal/bps_doesnotexist',
  ]) {
    const res = await app.inject({ url });
    t.equal(res.statusCode, 404, url);
    t.match(res.headers['content-type'], /^text\/html/, `${url}: a page, not JSON`);
  }
  t.equal(
    (
      await app.inject({
        method: 'POST',
        url: '/billing/sandbox/checkout/cs_test_doesnotexist/pay',
        headers: form,
        payload: '',
      })
    ).statusCode,
    404,
  );
  const { session, path } = await checkout();
  await db.query(sql.unsafe`
    update billing_sandbox_objects set data = jsonb_set(data, '{expires_at}', to_jsonb(1)) where id = ${session.id}`);
  t.equal((await app.inject({ url: path })).statusCode, 404, 'expired');
  t.equal(
    (await app.inject({ method: 'POST', url: `${path}/pay`, headers: form, payload: '' })).statusCode,
    404,
    'an expired checkout cannot be paid',
  );
});

t.test('portal page: subscriptions with items; cancel one, only the own customer', async (t) => {
  const { customer, path } = await checkout();
  await app.inject({ method: 'POST', url: `${path}/pay`, headers: form, payload: '' });
  const [sub] = (await stripe.subscriptions.list({ customer: customer.id })).data;
  await stripe.subscriptionItems.create({ subscription: sub!.id, price: prices.agentAddon, quantity: 2 });
  const portal = await stripe.billingPortal.sessions.create({
    customer: customer.id,
    return_url: 'http://app.test/back?x="<b>',
  });
  const portalPath = new URL(portal.url).pathname;

  const page = await app.inject({ url: portalPath });
  t.equal(page.statusCode, 200);
  t.match(page.body, 'Billing sandbox — no real payment');
  t.match(page.body, sub!.id);
  t.match(page.body, /Agent add-on<\/td><td>2<\/td>/);
  t.match(page.body, `action="${portalPath}/subscriptions/${sub!.id}/cancel"`);
  t.match(page.body, 'href="http://app.test/back?x=&quot;&lt;b&gt;"', 'the return link, escaped');
  t.notMatch(page.body, '"<b>');

  // Another customer's subscription is not reachable through this portal.
  const other = await checkout();
  await app.inject({ method: 'POST', url: `${other.path}/pay`, headers: form, payload: '' });
  const [foreign] = (await stripe.subscriptions.list({ customer: other.customer.id })).data;
  const refused = await app.inject({
    method: 'POST',
    url: `${portalPath}/subscriptions/${foreign!.id}/cancel`,
    headers: form,
    payload: '',
  });
  t.equal(refused.statusCode, 404);
  t.equal((await stripe.subscriptions.retrieve(foreign!.id)).status, 'active', 'untouched');

  const cancel = await app.inject({
    method: 'POST',
    url: `${portalPath}/subscriptions/${sub!.id}/cancel`,
    headers: form,
    payload: '',
  });
  t.equal(cancel.statusCode, 303);
  t.equal(cancel.headers.location, portalPath);
  t.equal((await stripe.subscriptions.retrieve(sub!.id)).status, 'canceled');
  const after = await app.inject({ url: portalPath });
  t.match(after.body, /\(canceled\)/);
  t.notMatch(after.body, /Cancel subscription/, 'nothing left to cancel');
});

t.test('the return page, in the sandbox and without it', async (t) => {
  for (const [query, title] of [
    ['checkout=success', 'Checkout complete'],
    ['checkout=cancelled', 'Checkout cancelled'],
    ['portal=done', 'Back from the billing portal'],
  ] as const) {
    const res = await app.inject({ url: `/billing/return?${query}` });
    t.equal(res.statusCode, 200, query);
    t.match(res.body, `<h1>${title}</h1>`);
    t.match(res.body, /you may close this window/i);
  }
  const production = await buildTestApp(t, databaseUrl, { NODE_ENV: 'production' });
  const res = await production.app.inject({ url: '/billing/return?checkout=success' });
  t.equal(res.statusCode, 200, 'served whatever the billing mode (the default success URL leads here)');
  t.notMatch(res.body, /sandbox/i, 'no sandbox notice outside the sandbox');
  t.equal((await production.app.inject({ url: '/billing/sandbox/portal/bps_doesnotexist' })).statusCode, 404);
});
