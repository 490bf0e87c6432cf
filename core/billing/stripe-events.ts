// Stripe webhook events: which tenant an event is about (at receipt), and how
// the billing.webhook job applies it. The job never trusts the event's copy
// of the subscription: it reads the subscription from Stripe, so deliveries
// that arrive late, twice or out of order all converge on Stripe's state.
import type Stripe from 'stripe';
import { z } from 'zod';
import type { Config } from '../config.ts';
import { sql, type CommonQueryMethods, type DatabasePool } from '../db/pool.ts';
import { PermanentJobError, RetryableJobError } from '../jobs/errors.ts';
import { PLAN_NAMES, planRank, type PlanName } from '../plans.ts';
import { isEntitled, lastEventAt, setEntitlement, type SubscriptionStatus } from './entitlements.ts';
import type { EventRow } from './events.ts';

/** Event types the job applies; anything else is stored and marked ignored. */
export const HANDLED_STRIPE_EVENTS = new Set([
  'checkout.session.completed',
  'customer.subscription.created',
  'customer.subscription.updated',
  'customer.subscription.deleted',
  'invoice.paid',
  'invoice.payment_failed',
]);

type AnyObject = Record<string, unknown> & { metadata?: Record<string, string> | null };
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

const str = (v: unknown): string | null =>
  typeof v === 'string' && v.length > 0
    ? v
    : typeof v === 'object' && v && typeof (v as { id?: unknown }).id === 'string'
      ? (v as { id: string }).id
      : null;

/** The subscription an event is about, wherever its type keeps it. */
export function subscriptionIdOf(event: Pick<Stripe.Event, 'type' | 'data'>): string | null {
  const object = event.data.object as unknown as AnyObject;
  if (event.type.startsWith('customer.subscription.')) return str(object.id);
  if (event.type === 'checkout.session.completed') return str(object.subscription);
  if (event.type.startsWith('invoice.')) {
    const parent = object.parent as { subscription_details?: { subscription?: unknown } } | null | undefined;
    return str(parent?.subscription_details?.subscription) ?? str(object.subscription);
  }
  return null;
}

/** The tenant an event names: our metadata, the checkout's reference, or the customer we created. */
export async function tenantOfStripeEvent(db: CommonQueryMethods, event: Stripe.Event): Promise<string | null> {
  const object = event.data.object as unknown as AnyObject;
  const parent = object.parent as
    | { subscription_details?: { metadata?: Record<string, string> | null } }
    | null
    | undefined;
  const candidates = [
    object.metadata?.tenant_id,
    object.client_reference_id,
    parent?.subscription_details?.metadata?.tenant_id,
  ].filter((v): v is string => typeof v === 'string' && UUID.test(v));
  const customer = str(object.customer);
  return db.maybeOneFirst(sql.type(z.object({ id: z.string() }))`
    select id from tenants where id = any(${sql.array(candidates, 'uuid')})
    union all
    select tenant_id from billing_customers where stripe_customer_id = ${customer ?? ''}
    limit 1`);
}

const STATUS: Record<Stripe.Subscription.Status, SubscriptionStatus> = {
  active: 'active',
  trialing: 'trialing',
  past_due: 'past_due', // Stripe is retrying the payment: access stays while it does
  incomplete: 'incomplete',
  // Retries exhausted, first payment never made, or paused: no access.
  unpaid: 'canceled',
  incomplete_expired: 'canceled',
  paused: 'canceled',
  canceled: 'canceled',
};

export type SubscriptionState = {
  plan: PlanName;
  status: SubscriptionStatus;
  agentAddons: number;
  currentPeriodEnd: Date | null;
};

/** What a Stripe subscription grants, by the configured price ids; null when none of its prices is ours. */
export function stateOfSubscription(config: Config, sub: Stripe.Subscription): SubscriptionState | null {
  const { prices } = config.billing.stripe;
  let plan: PlanName | null = null;
  let agentAddons = 0;
  let periodEnd = 0;
  for (const item of sub.items.data) {
    const price = item.price.id;
    if (price === prices.enterprise) plan = 'enterprise';
    else if (price === prices.pro && plan !== 'enterprise') plan = 'pro';
    else if (price === prices.agentAddon) agentAddons += item.quantity ?? 1;
    periodEnd = Math.max(periodEnd, (item as { current_period_end?: number }).current_period_end ?? 0);
  }
  if (!plan) return null;
  return {
    plan,
    status: STATUS[sub.status] ?? 'canceled',
    agentAddons,
    currentPeriodEnd: periodEnd ? new Date(periodEnd * 1000) : null,
  };
}

export type Applied = { status: 'applied' | 'ignored'; outcome: string; plan?: PlanName };
export type Finish = (tx: CommonQueryMethods, outcome: Applied) => Promise<void>;

/** Applies one stored Stripe event (the billing.webhook job). */
export async function applyStripeEvent(
  deps: { db: DatabasePool; config: Config; stripe: Stripe },
  row: EventRow,
  finish: Finish,
): Promise<Applied> {
  const ignore = async (outcome: string): Promise<Applied> => {
    const result: Applied = { status: 'ignored', outcome };
    await deps.db.transaction((tx) => finish(tx, result));
    return result;
  };
  const event = row.payload as Stripe.Event;
  const tenantId = row.tenant_id;
  if (!tenantId) return ignore('unknown_tenant');
  if (!HANDLED_STRIPE_EVENTS.has(event.type)) return ignore('unhandled_type');
  const subscriptionId = subscriptionIdOf(event);
  if (!subscriptionId) return ignore('no_subscription');
  const eventAt = new Date(event.created * 1000);
  const newest = await lastEventAt(deps.db, tenantId, 'stripe');
  if (newest && eventAt < newest) return ignore('older_than_state');

  // Stripe's current state of the subscription, whatever this event carried.
  let sub: Stripe.Subscription | null;
  try {
    sub = await deps.stripe.subscriptions.retrieve(subscriptionId);
  } catch (error) {
    const e = error as { type?: string; code?: string; statusCode?: number; message?: string };
    if (e.code === 'resource_missing') sub = null;
    else if (e.type === 'StripeAuthenticationError' || e.type === 'StripePermissionError') {
      throw new PermanentJobError(
        'stripe_auth_failed',
        `Stripe refused the API key: ${e.message ?? 'authentication failed'}.`,
      );
    } else
      throw new RetryableJobError('stripe_unavailable', `Stripe could not be read: ${e.message ?? String(error)}.`);
  }
  const state = sub ? stateOfSubscription(deps.config, sub) : null;
  if (sub && !state) return ignore('unknown_price');

  const result = await deps.db.transaction(async (tx): Promise<Applied> => {
    if (event.type === 'checkout.session.completed') {
      const customer = str((event.data.object as unknown as AnyObject).customer);
      if (customer) {
        await tx.query(sql.unsafe`
          insert into billing_customers (tenant_id, stripe_customer_id) values (${tenantId}, ${customer}) on conflict do nothing`);
      }
    }
    const current = await tx.maybeOne(sql.type(
      z.object({ plan: z.enum(PLAN_NAMES), status: z.string(), external_ref: z.string().nullable() }),
    )`
      select plan, status, external_ref from billing_entitlements where tenant_id = ${tenantId} and source = 'stripe' for update`);
    const next = state ?? {
      plan: current?.plan ?? 'free',
      status: 'canceled' as const,
      agentAddons: 0,
      currentPeriodEnd: null,
    };
    // Another, better subscription of the same tenant stays in force.
    const otherHolds =
      current?.external_ref &&
      current.external_ref !== subscriptionId &&
      isEntitled(current.status) &&
      (!isEntitled(next.status) || planRank(current.plan) > planRank(next.plan));
    if (otherHolds) {
      const outcome: Applied = { status: 'ignored', outcome: 'other_subscription_in_force' };
      await finish(tx, outcome);
      return outcome;
    }
    const written = await setEntitlement(
      tx,
      {
        tenantId,
        source: 'stripe',
        plan: next.plan,
        status: next.status,
        currentPeriodEnd: next.currentPeriodEnd,
        agentAddons: next.agentAddons,
        externalRef: subscriptionId,
        eventAt,
      },
      `stripe ${event.type} ${event.id}`,
    );
    const outcome: Applied =
      written === 'stale'
        ? { status: 'ignored', outcome: 'older_than_state' }
        : { status: 'applied', outcome: `${next.plan} ${next.status}`, plan: next.plan };
    await finish(tx, outcome);
    return outcome;
  });
  return result;
}
