// Billing figures: Stripe webhook events accepted per second over HTTP
// (signature verified, stored once, job enqueued; 32 clients), and how long
// from an event's arrival until the tenant's plan has changed (a worker
// re-reads the subscription and applies it). Billing runs on the built-in
// Stripe-compatible sandbox, so the SDK calls are real but answered locally.
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type Stripe from 'stripe';
import { z } from 'zod';
import { buildApp } from '../../api/app.ts';
import { SandboxStripeApi } from '../../core/billing/sandbox/stripe-api.ts';
import { loadConfig } from '../../core/config.ts';
import { sql } from '../../core/db/pool.ts';
import { JobEventHub } from '../../core/jobs/events.ts';
import { GroupCommitter } from '../../core/jobs/group-commit.ts';
import { startWorker } from '../../workers/worker.ts';
import { percentile, sleep, throughput } from './measure.ts';
import { truncateQueues, type BenchContext } from './scenarios.ts';

const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

function post(port: number, path: string, headers: Record<string, string>, body: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        method: 'POST',
        path,
        headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) },
        agent,
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

export async function billingFigures(ctx: BenchContext, benchEnv: Record<string, string>, samples: number) {
  // The sandbox is for development; the bench runs it on purpose.
  const config = loadConfig({ ...benchEnv, NODE_ENV: 'development', LOG_LEVEL: 'warn' });
  const hub = new JobEventHub(ctx.url, ctx.db, ctx.logger);
  await hub.start();
  const app = await buildApp({ config, db: ctx.db, jobEvents: hub, jobs: new GroupCommitter(ctx.db) });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const port = (app.server.address() as { port: number }).port;
  const secret = config.billing.stripe.webhookSecret;
  const stripe = app.billing.stripe();
  const sign = (payload: string) => stripe.webhooks.generateTestHeaderString({ payload, secret });
  const send = (event: unknown) => {
    const payload = JSON.stringify(event);
    return post(
      port,
      '/api/billing/webhook',
      { 'content-type': 'application/json', 'stripe-signature': sign(payload) },
      payload,
    );
  };
  // Events are captured here instead of being delivered, so the bench times the delivery.
  const captured: Stripe.Event[] = [];
  const sandbox = new SandboxStripeApi(ctx.db, {
    baseUrl: config.baseUrl,
    secretKey: config.billing.stripe.secretKey,
    prices: config.billing.stripe.prices,
    deliver: async (e) => void captured.push(e),
  });

  /** A tenant with a paid sandbox subscription whose events have not been delivered. */
  const subscribedTenant = async () => {
    const tenantId = await ctx.db.oneFirst(
      sql.type(z.object({ id: z.string() }))`insert into tenants (name) values ('bench billing') returning id`,
    );
    const customer = await stripe.customers.create({ metadata: { tenant_id: tenantId } });
    const session = await stripe.checkout.sessions.create({
      mode: 'subscription',
      customer: customer.id,
      client_reference_id: tenantId,
      line_items: [{ price: config.billing.stripe.prices.pro, quantity: 1 }],
      success_url: config.billing.successUrl,
      cancel_url: config.billing.cancelUrl,
      metadata: { tenant_id: tenantId },
      subscription_data: { metadata: { tenant_id: tenantId } },
    });
    captured.length = 0;
    await sandbox.completeCheckout(session.id);
    return { tenantId, completed: captured.find((e) => e.type === 'checkout.session.completed')! };
  };

  try {
    // Accepted/s: unique events about one tenant, no worker running (the jobs wait).
    const { completed } = await subscribedTenant();
    let n = 0;
    let failures = 0;
    const accepted = await throughput(32, ctx.seconds, async () => {
      const status = await send({ ...completed, id: `evt_bench_${++n}_${randomUUID().slice(0, 8)}` });
      if (status !== 200) failures++;
    });
    if (failures > 0) throw new Error(`${failures} webhook deliveries failed during the measurement`);
    await truncateQueues(ctx.db);
    await ctx.db.query(sql.unsafe`truncate billing_events cascade`);

    // Received -> plan changed, one event at a time, with a worker applying them.
    const worker = await startWorker({ config, databaseUrl: ctx.url, logger: ctx.logger });
    const latencies: number[] = [];
    try {
      for (let i = 0; i < samples; i++) {
        const { tenantId, completed: event } = await subscribedTenant();
        const t0 = performance.now();
        if ((await send(event)) !== 200) throw new Error('webhook refused');
        for (;;) {
          const plan = await ctx.db.oneFirst(
            sql.type(z.object({ plan: z.string() }))`select plan from tenants where id = ${tenantId}`,
          );
          if (plan === 'pro') break;
          await sleep(1);
        }
        latencies.push(performance.now() - t0);
      }
    } finally {
      await worker.stop();
    }
    return {
      acceptedPerSecond: accepted.perSecond,
      planChanged: { p50: percentile(latencies, 50), p99: percentile(latencies, 99) },
    };
  } finally {
    await app.close();
    await hub.stop();
  }
}
