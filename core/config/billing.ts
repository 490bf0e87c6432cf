// The billing part of the config: which mode the settings add up to, what
// production refuses, and the sandbox's stand-ins for Stripe's values.
import { createHmac } from 'node:crypto';
import { configError } from './errors.ts';
import type { SecretName } from './secrets.ts';
import type { Env } from './settings.ts';

/**
 * 'stripe': the real Stripe API (STRIPE_SECRET_KEY). 'sandbox': the built-in
 * Stripe-compatible sandbox (development and tests only). 'disabled':
 * production without Stripe settings; the billing routes answer 503.
 */
export type BillingMode = 'stripe' | 'sandbox' | 'disabled';

/** Config['billing']: what billingConfig returns. */
export type BillingConfig = ReturnType<typeof billingConfig>;

/** What Stripe mode cannot run without: a half-configured Stripe is refused at start rather than at a customer's checkout. */
const STRIPE_REQUIRES = [
  'STRIPE_WEBHOOK_SECRET',
  'STRIPE_PRICE_PRO',
  'STRIPE_PRICE_ENTERPRISE',
  'STRIPE_PRICE_AGENT_ADDON',
] as const;

function billingMode(e: Env): BillingMode {
  const sandboxAllowed = e.NODE_ENV !== 'production';
  if (e.BILLING_SANDBOX && !sandboxAllowed) {
    throw configError([
      'BILLING_SANDBOX: the billing sandbox is for development only; set STRIPE_SECRET_KEY in production',
    ]);
  }
  const mode: BillingMode =
    e.STRIPE_SECRET_KEY && !e.BILLING_SANDBOX
      ? 'stripe'
      : sandboxAllowed && e.BILLING_SANDBOX !== false
        ? 'sandbox'
        : 'disabled';
  if (mode === 'stripe') {
    const missing = STRIPE_REQUIRES.filter((n) => !e[n]);
    if (missing.length > 0) throw configError(missing.map((n) => `${n}: required with STRIPE_SECRET_KEY`));
  }
  return mode;
}

export function billingConfig(e: Env, baseUrl: string, secrets: Record<SecretName, Buffer>) {
  const mode = billingMode(e);
  // The sandbox's webhook secret is derived from the platform secret: stable across restarts, never configured.
  const derived = createHmac('sha256', secrets.PLATFORM_JWT_SECRET)
    .update('billing-sandbox-webhook')
    .digest('base64url');
  return {
    mode,
    stripe: {
      secretKey: mode === 'stripe' ? e.STRIPE_SECRET_KEY! : 'sk_test_sandbox',
      // The sandbox signs its events with a configured secret too (else one derived from the platform secret).
      webhookSecret: e.STRIPE_WEBHOOK_SECRET ?? `whsec_${derived}`,
      /** Where the Stripe SDK sends requests (a local server in tests); undefined = api.stripe.com. */
      apiBase: e.STRIPE_API_BASE,
      prices: {
        pro: e.STRIPE_PRICE_PRO ?? 'price_sandbox_pro',
        enterprise: e.STRIPE_PRICE_ENTERPRISE ?? 'price_sandbox_enterprise',
        agentAddon: e.STRIPE_PRICE_AGENT_ADDON ?? 'price_sandbox_agent_addon',
      },
    },
    successUrl: e.BILLING_SUCCESS_URL ?? `${baseUrl}/billing/return?checkout=success`,
    cancelUrl: e.BILLING_CANCEL_URL ?? `${baseUrl}/billing/return?checkout=cancelled`,
    portalReturnUrl: e.BILLING_PORTAL_RETURN_URL ?? `${baseUrl}/billing/return?portal=done`,
    purchase: {
      apiBase: e.PURCHASE_API_BASE,
      apiKey: e.PURCHASE_API_KEY,
      webhookSecret: e.PURCHASE_WEBHOOK_SECRET,
      /** Entitlement identifiers of the in-app purchase provider that grant each plan. */
      entitlements: { pro: e.PURCHASE_ENTITLEMENT_PRO, enterprise: e.PURCHASE_ENTITLEMENT_ENTERPRISE },
    },
  };
}
