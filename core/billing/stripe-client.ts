// The Stripe SDK, configured for this deployment. With a real key it talks to
// api.stripe.com (or STRIPE_API_BASE, a local server in tests). In the
// sandbox the same SDK talks to the built-in Stripe-compatible sandbox
// in-process (its fetch is the sandbox's handler), so every billing code path
// runs the same SDK calls in development, tests and production. The SDK is
// loaded and made at its first use (stripe-sdk.ts).
import type Stripe from 'stripe';
import type { Config } from '../config.ts';
import type { DatabasePool } from '../db/pool.ts';
import { SandboxStripeApi, type SandboxDelivery } from './sandbox/stripe-api.ts';
import { stripeSdk } from './stripe-sdk.ts';

export type StripeHandle = {
  /** The SDK, made at the first call. */
  stripe: () => Stripe;
  /** The sandbox behind the SDK, when billing runs in the sandbox. */
  sandbox: SandboxStripeApi | null;
};

export function createStripe(config: Config, db: DatabasePool, deliver?: SandboxDelivery): StripeHandle {
  const { stripe: settings } = config.billing;
  const common = {
    maxNetworkRetries: 2,
    timeout: 20_000,
    telemetry: false,
    appInfo: { name: 'agent-platform' },
  } as const;
  const sandbox =
    config.billing.mode === 'sandbox' && !settings.apiBase
      ? new SandboxStripeApi(db, {
          baseUrl: config.baseUrl,
          secretKey: settings.secretKey,
          prices: settings.prices,
          deliver,
        })
      : null;
  const create = (): Stripe => {
    const Sdk = stripeSdk();
    if (sandbox)
      return new Sdk(settings.secretKey, { ...common, httpClient: Sdk.createFetchHttpClient(sandbox.fetch) });
    if (settings.apiBase) {
      const url = new URL(settings.apiBase);
      const protocol = url.protocol === 'http:' ? 'http' : 'https';
      const port = Number(url.port || (protocol === 'http' ? 80 : 443));
      return new Sdk(settings.secretKey, { ...common, host: url.hostname, port, protocol });
    }
    return new Sdk(settings.secretKey, common);
  };
  let stripe: Stripe | undefined;
  return { stripe: () => (stripe ??= create()), sandbox };
}
