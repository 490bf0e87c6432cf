// Subscriptions and their items: changes, cancellation and listing, each
// under a row lock on the subscription, each change announced by an event.
import type { FormObject } from './form-decoding.ts';
import {
  allowOnly,
  boolean,
  integer,
  invalid,
  itemsList,
  knownPrice,
  list,
  listParam,
  mergeMetadata,
  noSuch,
  nowSeconds,
  periodOf,
  previousAttributes,
  subscriptionItem,
  text,
  type Subscription,
  type SubscriptionItem,
} from './objects.ts';
import type { Context, Handler } from './routes.ts';
import { existingCustomer } from './sessions.ts';
import { loadObject, saveObject, subscriptionOfItem, subscriptionsOfCustomer } from './store.ts';

async function lockedSubscription(ctx: Context, id: string): Promise<Subscription> {
  const sub = await loadObject<Subscription>(ctx.tx, id, 'subscription', { lock: true });
  if (!sub) throw noSuch('subscription', id);
  return sub;
}

// ------------------------------------------------------------ subscriptions

async function saveChanged(ctx: Context, before: Subscription, after: Subscription): Promise<Subscription> {
  const previous = previousAttributes(before, after);
  if (Object.keys(previous).length === 0) return after;
  await saveObject(ctx.tx, after);
  await ctx.emit('customer.subscription.updated', after, previous);
  return after;
}

function refuseIfCanceled(sub: Subscription) {
  if (sub.status === 'canceled')
    throw invalid('A canceled subscription can only update its cancellation_details and metadata.');
}

function checkProration(params: FormObject) {
  const value = text(params, 'proration_behavior');
  if (value !== null && !['create_prorations', 'none', 'always_invoice'].includes(value)) {
    throw invalid(
      `Invalid proration_behavior: must be one of create_prorations, none, or always_invoice`,
      'proration_behavior',
    );
  }
}

/** Applies `items[i][id|price|quantity|deleted]` to a copy of the items. */
function changedItems(ctx: Context, sub: Subscription, entries: FormObject[]): SubscriptionItem[] {
  const items = sub.items.data.map((item) => ({ ...item }));
  entries.forEach((entry, i) => {
    const at = (name: string) => `items[${i}][${name}]`;
    allowOnly(entry, ['id', 'price', 'quantity', 'deleted', 'metadata'], `items[${i}]`);
    const id = text(entry, 'id', { param: at('id') });
    const priceId = text(entry, 'price', { param: at('price') });
    const quantity = integer(entry, 'quantity', at('quantity'));
    const index = id ? items.findIndex((item) => item.id === id) : -1;
    if (id && index < 0) throw noSuch('subscription item', id, at('id'));
    if (boolean(entry, 'deleted', at('deleted'))) {
      if (!id) throw invalid(`Missing required param: ${at('id')}.`, at('id'));
      items.splice(index, 1);
      return;
    }
    const price = priceId ? knownPrice(ctx.prices, priceId, at('price')) : null;
    if (price && items.some((item, j) => j !== index && item.price.id === price.id)) {
      throw invalid(`Cannot add multiple subscription items with the same price: ${price.id}`, at('price'));
    }
    if (index >= 0) {
      items[index] = { ...items[index]!, ...(price ? { price } : {}), ...(quantity !== null ? { quantity } : {}) };
    } else {
      if (!price) throw invalid(`Missing required param: ${at('price')}.`, at('price'));
      items.push(subscriptionItem(sub.id, price, quantity ?? 1, periodOf(sub)));
    }
  });
  if (items.length === 0) throw invalid('A subscription must have at least one active item.', 'items');
  return items;
}

export const updateSubscription: Handler = async (ctx, params, id) => {
  allowOnly(params, [
    'metadata',
    'cancel_at_period_end',
    'items',
    'proration_behavior',
    'description',
    'cancellation_details',
  ]);
  checkProration(params);
  const before = await lockedSubscription(ctx, id);
  const after: Subscription = { ...before, metadata: mergeMetadata(before.metadata, params) };
  const entries = listParam(params, 'items');
  const cancelAtEnd = boolean(params, 'cancel_at_period_end');
  if (entries.length > 0 || cancelAtEnd !== null) refuseIfCanceled(before);
  if (entries.length > 0) after.items = itemsList(id, changedItems(ctx, before, entries));
  if (cancelAtEnd !== null) {
    after.cancel_at_period_end = cancelAtEnd;
    after.cancel_at = cancelAtEnd ? periodOf(after).end : null;
  }
  if (params.description !== undefined) after.description = text(params, 'description');
  return saveChanged(ctx, before, after);
};

/** Ends a subscription now (DELETE, or the portal's "Cancel subscription"). */
export async function cancelNow(ctx: Context, before: Subscription): Promise<Subscription> {
  const at = nowSeconds();
  const after: Subscription = {
    ...before,
    status: 'canceled',
    canceled_at: at,
    ended_at: at,
    cancel_at: null,
    cancel_at_period_end: false,
    cancellation_details: { comment: null, feedback: null, reason: 'cancellation_requested' },
  };
  await saveObject(ctx.tx, after);
  await ctx.emit('customer.subscription.deleted', after, previousAttributes(before, after));
  return after;
}

export const cancelSubscription: Handler = async (ctx, params, id) => {
  allowOnly(params, ['invoice_now', 'prorate', 'cancellation_details']);
  const sub = await lockedSubscription(ctx, id);
  if (sub.status === 'canceled') throw invalid(`The subscription ${id} is already canceled.`);
  return cancelNow(ctx, sub);
};

export const listSubscriptions: Handler = async (ctx, params) => {
  allowOnly(params, ['customer', 'status', 'limit', 'price', 'starting_after', 'ending_before']);
  const customer = text(params, 'customer');
  if (customer) await existingCustomer(ctx, customer, 'customer');
  const limit = integer(params, 'limit') ?? 10;
  if (limit < 1 || limit > 100) throw invalid('limit must be between 1 and 100.', 'limit');
  const rows = await subscriptionsOfCustomer(ctx.tx, { customer, status: text(params, 'status'), limit: limit + 1 });
  return list(rows.slice(0, limit), '/v1/subscriptions', rows.length > limit);
};

// ------------------------------------------------------------ subscription items

async function subscriptionWithItem(ctx: Context, itemId: string): Promise<Subscription> {
  const sub = await subscriptionOfItem(ctx.tx, itemId);
  if (!sub) throw noSuch('subscription item', itemId);
  return sub;
}

export const createSubscriptionItem: Handler = async (ctx, params) => {
  allowOnly(params, ['subscription', 'price', 'quantity', 'proration_behavior', 'metadata']);
  checkProration(params);
  const subId = text(params, 'subscription', { required: true })!;
  const before = await loadObject<Subscription>(ctx.tx, subId, 'subscription', { lock: true });
  if (!before) throw noSuch('subscription', subId, 'subscription');
  refuseIfCanceled(before);
  // Checked here first, so a refusal names this endpoint's parameters.
  const price = knownPrice(ctx.prices, text(params, 'price', { required: true })!, 'price');
  const quantity = integer(params, 'quantity') ?? 1;
  const items = changedItems(ctx, before, [{ price: price.id, quantity: String(quantity) }]);
  await saveChanged(ctx, before, { ...before, items: itemsList(subId, items) });
  return items[items.length - 1]!;
};

export const updateSubscriptionItem: Handler = async (ctx, params, id) => {
  allowOnly(params, ['quantity', 'price', 'proration_behavior', 'metadata']);
  checkProration(params);
  const before = await subscriptionWithItem(ctx, id);
  refuseIfCanceled(before);
  const entry: FormObject = { id };
  const quantity = integer(params, 'quantity');
  const price = text(params, 'price');
  if (quantity !== null) entry.quantity = String(quantity);
  if (price !== null) entry.price = knownPrice(ctx.prices, price, 'price').id;
  const items = changedItems(ctx, before, [entry]);
  await saveChanged(ctx, before, { ...before, items: itemsList(before.id, items) });
  return items.find((item) => item.id === id)!;
};

export const deleteSubscriptionItem: Handler = async (ctx, params, id) => {
  allowOnly(params, ['proration_behavior', 'clear_usage']);
  const before = await subscriptionWithItem(ctx, id);
  refuseIfCanceled(before);
  const items = changedItems(ctx, before, [{ id, deleted: 'true' }]);
  await saveChanged(ctx, before, { ...before, items: itemsList(before.id, items) });
  return { id, object: 'subscription_item', deleted: true };
};

export const retrieveSubscriptionItem: Handler = async (ctx, params, id) => {
  allowOnly(params, []);
  const sub = await subscriptionWithItem(ctx, id);
  return sub.items.data.find((item) => item.id === id)!;
};
