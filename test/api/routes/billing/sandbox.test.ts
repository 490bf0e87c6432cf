// The built-in billing sandbox (development, no Stripe key): a person can try
// the whole flow. Checkout answers a local page; Pay sends a signed event
// through /api/billing/webhook, so the plan changes by the production code.
// In production the sandbox is refused and billing without Stripe is 503.
import t from 'tap';
import { z } from 'zod';
import { loadConfig } from '../../../../core/config.ts';
import { sql } from '../../../../core/db/pool.ts';
import { buildTestApp } from '../../../helpers/app.ts';
import { testEnv } from '../../../helpers/config.ts';
import { createTestDatabase } from '../../../helpers/db.ts';
import { createMember } from '../../../helpers/fixtures.ts';
import { waitFor } from '../../../helpers/wait.ts';
import { startTestWorker } from '../../../helpers/worker.ts';

const databaseUrl = await createTestDatabase(t);

t.test('sandbox checkout in development changes the plan end to end', async (t) => {
  const { app, db, config } = await buildTestApp(t, databaseUrl, { NODE_ENV: 'development' });
  await startTestWorker(t, databaseUrl, { NODE_ENV: 'development' });
  t.equal(config.billing.mode, 'sandbox');
  const m = await createMember(db);
  const headers = { authorization: `Bearer ${m.token}`, 'x-tenant-id': m.tenantId };

  const checkout = await app.inject({ method: 'POST', url: '/api/billing/checkout', headers });
  t.equal(checkout.statusCode, 200, checkout.body);
  const url = new URL(checkout.json().url);
  t.equal(url.origin, config.baseUrl, 'a page of this deployment');
  const page = await app.inject({ url: url.pathname });
  t.equal(page.statusCode, 200);
  t.match(page.headers['content-type'], /text\/html/);
  t.match(page.body, /Pay/);
  t.match(page.body, /sandbox/i, 'says it is a sandbox');

  const paid = await app.inject({
    method: 'POST',
    url: `${url.pathname}/pay`,
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    payload: '',
  });
  t.equal(paid.statusCode, 303);
  t.equal(paid.headers.location, config.billing.successUrl);
  const back = await app.inject({ url: `${new URL(paid.headers.location as string).pathname}?checkout=success` });
  t.equal(back.statusCode, 200);

  await waitFor('the plan to change', async () => {
    const plan = await db.oneFirst(
      sql.type(z.object({ plan: z.string() }))`select plan from tenants where id = ${m.tenantId}`,
    );
    return plan === 'pro' ? plan : null;
  });
  const status = (await app.inject({ url: '/api/billing/status', headers })).json();
  t.match(status, { plan: 'pro', status: 'active', source: 'stripe' });
  // The plan changes with the first event applied; the others follow on the tenant's queue.
  const events = await waitFor('every sandbox event to be applied', async () => {
    const rows = await db.anyFirst(sql.type(z.object({ type: z.string() }))`
      select type from billing_events where tenant_id = ${m.tenantId} and status = 'applied' order by received_at`);
    return rows.length >= 3 ? rows : null;
  });
  t.ok(events.includes('checkout.session.completed'), 'applied through the webhook path');

  const portal = await app.inject({ method: 'POST', url: '/api/billing/portal', headers });
  t.equal(portal.statusCode, 200);
  t.equal((await app.inject({ url: new URL(portal.json().url).pathname })).statusCode, 200, 'the sandbox portal page');
});

t.test('the sandbox is refused in production; billing without Stripe answers 503', async (t) => {
  t.throws(
    () => loadConfig(testEnv(databaseUrl, { NODE_ENV: 'production', BILLING_SANDBOX: 'true' })),
    /BILLING_SANDBOX: the billing sandbox is for development only/,
  );
  t.throws(
    () => loadConfig(testEnv(databaseUrl, { NODE_ENV: 'production', STRIPE_SECRET_KEY: 'sk_live_abc' })),
    /STRIPE_WEBHOOK_SECRET: required with STRIPE_SECRET_KEY/,
  );
  const { app, db, config } = await buildTestApp(t, databaseUrl, { NODE_ENV: 'production' });
  t.equal(config.billing.mode, 'disabled');
  const m = await createMember(db);
  const headers = { authorization: `Bearer ${m.token}`, 'x-tenant-id': m.tenantId };
  for (const url of [
    '/api/billing/checkout',
    '/api/billing/checkout/enterprise',
    '/api/billing/portal',
    '/api/billing/agent-addon',
  ]) {
    const res = await app.inject({ method: 'POST', url, headers });
    t.equal(res.statusCode, 503, url);
    t.equal(res.json().error, 'billing_not_configured');
  }
  t.equal(
    (await app.inject({ url: '/billing/sandbox/checkout/cs_test_aaaaaaaaaaaa' })).statusCode,
    404,
    'no sandbox pages',
  );
  const webhook = await app.inject({
    method: 'POST',
    url: '/api/billing/webhook',
    headers: { 'content-type': 'application/json', 'stripe-signature': 't=1,v1=x' },
    payload: '{}',
  });
  t.equal(webhook.statusCode, 503);
});
