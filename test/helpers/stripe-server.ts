// A local "Stripe" for tests: the billing sandbox on a real HTTP server at
// 127.0.0.1, so the stripe SDK (host/port/protocol) makes real requests and
// never reaches api.stripe.com. Events the sandbox emits are collected.
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type Stripe from 'stripe';
import type { Test } from 'tap';
import { SandboxStripeApi, type SandboxOptions } from '../../core/billing/sandbox/stripe-api.ts';
import type { DatabasePool } from '../../core/db/pool.ts';

export type StripeServer = {
  url: string;
  api: SandboxStripeApi;
  /** Every event delivered, in order (unless options.deliver was given). */
  events: Stripe.Event[];
  secretKey: string;
  prices: SandboxOptions['prices'];
};

export async function startStripeServer(
  t: Test,
  db: DatabasePool,
  options: Partial<SandboxOptions> = {},
): Promise<StripeServer> {
  const events: Stripe.Event[] = [];
  const secretKey = options.secretKey ?? `sk_test_${randomBytes(16).toString('hex')}`;
  const prices = options.prices ?? {
    pro: 'price_test_pro',
    enterprise: 'price_test_enterprise',
    agentAddon: 'price_test_addon',
  };
  let api: SandboxStripeApi | undefined;

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      void (async () => {
        const headers = new Headers();
        for (const [name, value] of Object.entries(req.headers)) {
          if (value !== undefined) headers.set(name, Array.isArray(value) ? value.join(', ') : value);
        }
        const hasBody = req.method !== 'GET' && req.method !== 'HEAD';
        const response = await api!.fetch(`http://127.0.0.1${req.url ?? '/'}`, {
          method: req.method,
          headers,
          ...(hasBody ? { body: Buffer.concat(chunks) } : {}),
        });
        const body = Buffer.from(await response.arrayBuffer());
        res.writeHead(response.status, Object.fromEntries(response.headers));
        res.end(body);
      })().catch((error: Error) => {
        res.writeHead(500, { 'content-type': 'text/plain' });
        res.end(String(error.stack ?? error));
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  t.teardown(async () => {
    server.closeAllConnections(); // the SDK keeps connections alive
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  api = new SandboxStripeApi(db, {
    baseUrl: options.baseUrl ?? url,
    secretKey,
    prices,
    deliver: options.deliver ?? (async (event) => void events.push(event)),
  });
  return { url, api, events, secretKey, prices };
}
