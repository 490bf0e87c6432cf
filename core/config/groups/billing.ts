// Stripe, the built-in billing sandbox, and the in-app purchase provider.
// Which mode follows from them, and what production refuses, is worked out
// in core/config/billing.ts.
import { z } from 'zod';
import { group, setting } from '../declare.ts';
import { boolFromEnv, nonEmpty, urlFromEnv } from '../parsers.ts';

const returnPage = (query: string) => `\`BASE_URL/billing/return?${query}\``;

export const billing = group('Billing', 'See [Plans and billing](billing.md).', {
  STRIPE_SECRET_KEY: setting(
    z
      .string()
      .regex(/^(sk|rk)_(test|live)_\S+$/, 'must be a Stripe secret or restricted key (sk_test_..., sk_live_...)'),
    {
      shown: 'unset (sandbox in development)',
      doc: 'Stripe secret or restricted key; with it the webhook secret and the three prices are required',
    },
  ),
  STRIPE_WEBHOOK_SECRET: setting(z.string().regex(/^whsec_\S+$/, 'must be a webhook signing secret (whsec_...)'), {
    shown: 'derived in the sandbox',
    doc: "The endpoint's signing secret (`whsec_...`); the sandbox signs its events with it too when it is set",
  }),
  STRIPE_API_BASE: setting(urlFromEnv, {
    shown: '`https://api.stripe.com`',
    doc: 'Where the Stripe SDK sends requests (a local Stripe-compatible server)',
  }),
  STRIPE_PRICE_PRO: setting(nonEmpty, { shown: 'sandbox price', doc: 'Recurring price id of the Pro plan' }),
  STRIPE_PRICE_ENTERPRISE: setting(nonEmpty, {
    shown: 'sandbox price',
    doc: 'Recurring price id of the Enterprise plan',
  }),
  STRIPE_PRICE_AGENT_ADDON: setting(nonEmpty, {
    shown: 'sandbox price',
    doc: 'Recurring price id of one extra agent slot',
  }),
  BILLING_SANDBOX: setting(boolFromEnv, {
    shown: 'on in development without a key',
    doc: '`false` switches the sandbox off; `true` is refused in production',
  }),
  BILLING_SUCCESS_URL: setting(urlFromEnv, {
    shown: returnPage('checkout=success'),
    doc: 'Where Checkout sends the person back after paying',
  }),
  BILLING_CANCEL_URL: setting(urlFromEnv, {
    shown: returnPage('checkout=cancelled'),
    doc: 'Where Checkout sends the person back when they cancel',
  }),
  BILLING_PORTAL_RETURN_URL: setting(urlFromEnv, { shown: returnPage('portal=done'), doc: "The portal's way back" }),
  PURCHASE_API_BASE: setting(urlFromEnv, {
    default: 'https://api.revenuecat.com',
    doc: "The in-app purchase provider's server API",
  }),
  PURCHASE_API_KEY: setting(nonEmpty, {
    doc: 'Its secret API key; without it `purchase-sync` is `503 billing_not_configured`',
  }),
  PURCHASE_WEBHOOK_SECRET: setting(z.string().min(16, 'must be at least 16 characters'), {
    doc: 'The bearer value the provider sends to `purchase-webhook` (16+ characters)',
  }),
  PURCHASE_ENTITLEMENT_PRO: setting(nonEmpty, {
    default: 'pro',
    doc: "The provider's entitlement id that grants the Pro plan",
  }),
  PURCHASE_ENTITLEMENT_ENTERPRISE: setting(nonEmpty, {
    default: 'enterprise',
    doc: "The provider's entitlement id that grants the Enterprise plan",
  }),
});
