// What the billing routes ask of Stripe: a customer per tenant (created once,
// even under racing requests), checkout and portal sessions, and the agent
// add-on. Outside calls happen outside any database transaction.
import type Stripe from 'stripe';
import { z } from 'zod';
import type { Config } from '../config.ts';
import { sql, type DatabasePool } from '../db/pool.ts';
import { DatabaseUnavailableError } from '../db/unavailable.ts';
import { SANDBOX_DATABASE_UNAVAILABLE } from './sandbox/objects.ts';
import { PLAN_NAMES, planRank, type PlanName } from '../plans.ts';
import { agentSlots, ENTITLED_STATUSES, isEntitled, setEntitlement } from './entitlements.ts';
import { stateOfSubscription } from './stripe-events.ts';

export class BillingRefusal extends Error {
  override name = 'BillingRefusal';
  constructor(
    readonly status: 402 | 404 | 409 | 502 | 503,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

type Deps = { db: DatabasePool; config: Config; stripe: Stripe };

const TenantRow = z.object({ name: z.string(), plan: z.enum(PLAN_NAMES) });

/** Stripe errors other than our own refusals: the caller sees 502 with Stripe's reason, never a stack. */
async function callStripe<T>(what: string, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (error) {
    const e = error as { type?: string; message?: string; code?: string };
    // The built-in sandbox could not reach our own database: an outage (503), not Stripe failing.
    if (e.code === SANDBOX_DATABASE_UNAVAILABLE)
      throw new DatabaseUnavailableError(e.message ?? 'the billing sandbox could not reach the database');
    if (typeof e.type === 'string' && e.type.startsWith('Stripe')) {
      throw new BillingRefusal(502, 'payment_processor_error', `Stripe refused to ${what}: ${e.message ?? e.type}.`);
    }
    throw error;
  }
}

export function requireBilling(config: Config) {
  if (config.billing.mode === 'disabled') {
    throw new BillingRefusal(
      503,
      'billing_not_configured',
      'Billing is not configured on this deployment: set STRIPE_SECRET_KEY, STRIPE_WEBHOOK_SECRET and the STRIPE_PRICE_* settings.',
    );
  }
}

async function storedCustomer(db: DatabasePool, tenantId: string): Promise<string | null> {
  return db.maybeOneFirst(sql.type(z.object({ stripe_customer_id: z.string() }))`
    select stripe_customer_id from billing_customers where tenant_id = ${tenantId}`);
}

/**
 * The tenant's Stripe customer. Two racing requests send the same Stripe
 * idempotency key, so Stripe creates one customer; the unique row keeps it.
 */
export async function ensureCustomer(
  deps: Deps,
  tenant: { id: string; name: string },
  email: string | null,
): Promise<string> {
  const tenantId = tenant.id;
  const existing = await storedCustomer(deps.db, tenantId);
  if (existing) return existing;
  const customer = await callStripe('create a customer', () =>
    deps.stripe.customers.create(
      { name: tenant.name, ...(email ? { email } : {}), metadata: { tenant_id: tenantId } },
      { idempotencyKey: `customer-${tenantId}` },
    ),
  );
  await deps.db.query(sql.unsafe`
    insert into billing_customers (tenant_id, stripe_customer_id) values (${tenantId}, ${customer.id}) on conflict (tenant_id) do nothing`);
  return (await storedCustomer(deps.db, tenantId))!;
}

export async function startCheckout(
  deps: Deps,
  tenantId: string,
  plan: Exclude<PlanName, 'free'>,
  email: string | null,
): Promise<{ url: string; sessionId: string }> {
  requireBilling(deps.config);
  const tenant = await deps.db.one(sql.type(TenantRow)`select name, plan from tenants where id = ${tenantId}`);
  if (planRank(tenant.plan) >= planRank(plan)) {
    throw new BillingRefusal(
      409,
      'already_on_plan',
      tenant.plan === plan
        ? `The workspace is already on the ${plan} plan.`
        : `The workspace is on the ${tenant.plan} plan, which includes everything in ${plan}; change or cancel it in the billing portal (POST /api/billing/portal).`,
    );
  }
  // A second subscription would bill twice: a paid Stripe plan changes in the portal.
  const paying = await deps.db.exists(sql.unsafe`
    select 1 from billing_entitlements where tenant_id = ${tenantId} and source = 'stripe' and status = any(${sql.array([...ENTITLED_STATUSES], 'text')})`);
  if (paying) {
    throw new BillingRefusal(
      409,
      'subscription_exists',
      `The workspace already has a Stripe subscription; change it to ${plan} in the billing portal (POST /api/billing/portal).`,
    );
  }
  const customer = await ensureCustomer(deps, { id: tenantId, name: tenant.name }, email);
  const { prices } = deps.config.billing.stripe;
  const session = await callStripe('start a checkout', () =>
    deps.stripe.checkout.sessions.create({
      mode: 'subscription',
      customer,
      client_reference_id: tenantId,
      line_items: [{ price: plan === 'pro' ? prices.pro : prices.enterprise, quantity: 1 }],
      success_url: deps.config.billing.successUrl,
      cancel_url: deps.config.billing.cancelUrl,
      metadata: { tenant_id: tenantId, plan },
      subscription_data: { metadata: { tenant_id: tenantId, plan } },
    }),
  );
  if (!session.url)
    throw new BillingRefusal(502, 'payment_processor_error', 'Stripe returned a checkout session without a URL.');
  return { url: session.url, sessionId: session.id };
}

export async function openPortal(deps: Deps, tenantId: string): Promise<{ url: string }> {
  requireBilling(deps.config);
  const customer = await storedCustomer(deps.db, tenantId);
  if (!customer) {
    throw new BillingRefusal(
      409,
      'no_billing_customer',
      'The workspace has no billing account yet; start with a checkout (POST /api/billing/checkout).',
    );
  }
  const session = await callStripe('open the billing portal', () =>
    deps.stripe.billingPortal.sessions.create({ customer, return_url: deps.config.billing.portalReturnUrl }),
  );
  return { url: session.url };
}

const StripeGrant = z.object({ external_ref: z.string().nullable(), status: z.string() });

/**
 * One more agent slot on the tenant's Stripe subscription (the add-on
 * price's quantity + 1, prorated). Applied at once from Stripe's answer; the
 * webhook that follows finds the same state.
 */
export async function addAgentSlot(deps: Deps, tenantId: string, idempotencyKey: string | undefined) {
  requireBilling(deps.config);
  const grant = await deps.db.maybeOne(sql.type(StripeGrant)`
    select external_ref, status from billing_entitlements where tenant_id = ${tenantId} and source = 'stripe'`);
  if (!grant?.external_ref || !isEntitled(grant.status)) {
    throw new BillingRefusal(
      409,
      'no_active_subscription',
      'Agent slots are added to a paid Stripe subscription; subscribe first with POST /api/billing/checkout.',
    );
  }
  const subscriptionId = grant.external_ref;
  if (idempotencyKey) {
    // The first request with this key claims it; a retry answers the slots as they are now.
    const claimed = await deps.db.maybeOne(sql.unsafe`
      insert into billing_addon_purchases (tenant_id, idempotency_key) values (${tenantId}, ${idempotencyKey})
      on conflict do nothing returning tenant_id`);
    if (!claimed) return { subscriptionId, agentSlots: (await agentSlots(deps.db, tenantId))! };
  }
  try {
    return await buyAgentSlot(deps, tenantId, subscriptionId, idempotencyKey);
  } catch (error) {
    // Nothing was bought: the key may be used again.
    if (idempotencyKey)
      await deps.db.query(
        sql.unsafe`delete from billing_addon_purchases where tenant_id = ${tenantId} and idempotency_key = ${idempotencyKey}`,
      );
    throw error;
  }
}

async function buyAgentSlot(deps: Deps, tenantId: string, subscriptionId: string, idempotencyKey: string | undefined) {
  const addonPrice = deps.config.billing.stripe.prices.agentAddon;
  const options = idempotencyKey ? { idempotencyKey: `addon-${tenantId}-${idempotencyKey}` } : {};
  const sub = await callStripe('read the subscription', () => deps.stripe.subscriptions.retrieve(subscriptionId));
  const item = sub.items.data.find((i) => i.price.id === addonPrice);
  await callStripe('add the agent slot', () =>
    item
      ? deps.stripe.subscriptionItems.update(
          item.id,
          { quantity: (item.quantity ?? 1) + 1, proration_behavior: 'create_prorations' },
          options,
        )
      : deps.stripe.subscriptionItems.create(
          { subscription: subscriptionId, price: addonPrice, quantity: 1, proration_behavior: 'create_prorations' },
          options,
        ),
  );
  const updated = await callStripe('read the subscription', () => deps.stripe.subscriptions.retrieve(subscriptionId));
  const state = stateOfSubscription(deps.config, updated);
  if (state) {
    await deps.db.transaction((tx) =>
      setEntitlement(
        tx,
        {
          tenantId,
          source: 'stripe',
          plan: state.plan,
          status: state.status,
          currentPeriodEnd: state.currentPeriodEnd,
          agentAddons: state.agentAddons,
          externalRef: subscriptionId,
        },
        'agent add-on bought',
      ),
    );
  }
  return { subscriptionId, agentSlots: (await agentSlots(deps.db, tenantId))! };
}
