// The Stripe SDK, configured for this deployment. With a real key it talks to
// api.stripe.com (or STRIPE_API_BASE, a local server in tests). In the
// sandbox the same SDK talks to the built-in Stripe-compatible sandbox
// in-process (its fetch is the sandbox's handler), so every billing code path
// runs the same SDK calls in development, tests and production.
import Stripe from 'stripe';
import type { Config } from '../config.ts';
import type { DatabasePool } from '../db/pool.ts';
import { SandboxStripeApi, type SandboxDelivery } from './sandbox/stripe-api.ts';

export type StripeHandle = {
  stripe: Stripe;
  /** The sandbox behind the SDK, when billing runs in the sandbox. */
  sandbox: SandboxStripeApi | null;
};

export function createStripe(config: Config, db: DatabasePool, deliver?: SandboxDelivery): StripeHandle {
  const { stripe: settings } = config.billing;
  const common = { maxNetworkRetries: 2, timeout: 20_000, telemetry: false, appInfo: { name: 'agent-platform' } } as const;
  if (config.billing.mode === 'sandbox' && !settings.apiBase) {
    const sandbox = new SandboxStripeApi(db, { baseUrl: config.baseUrl, secretKey: settings.secretKey, prices: settings.prices, deliver });
    const stripe = new Stripe(settings.secretKey, { ...common, httpClient: Stripe.createFetchHttpClient(sandbox.fetch) });
    return { stripe, sandbox };
  }
  if (settings.apiBase) {
    const url = new URL(settings.apiBase);
    const protocol = url.protocol === 'http:' ? 'http' : 'https';
    const port = Number(url.port || (protocol === 'http' ? 80 : 443));
    return { stripe: new Stripe(settings.secretKey, { ...common, host: url.hostname, port, protocol }), sandbox: null };
  }
  return { stripe: new Stripe(settings.secretKey, common), sandbox: null };
}
