// The sandbox's endpoints, by Stripe's paths. Each handler runs inside the
// transaction the caller opened; events are emitted into that transaction
// and delivered by the caller after it commits.
import type { DatabaseTransactionConnection } from '../../db/pool.ts';
import type { FormObject } from './form-decoding.ts';
import { allowOnly, noSuch, type Json, type SandboxPrices } from './objects.ts';
import { createCheckoutSession, createCustomer, createPortalSession, sessionAsOfNow } from './sessions.ts';
import { loadObject } from './store.ts';
import {
  cancelSubscription,
  createSubscriptionItem,
  deleteSubscriptionItem,
  listSubscriptions,
  retrieveSubscriptionItem,
  updateSubscription,
  updateSubscriptionItem,
} from './subscriptions.ts';

export type Context = {
  tx: DatabaseTransactionConnection;
  baseUrl: string;
  prices: SandboxPrices;
  /** Records an event about `object` as it is now; delivered after commit. */
  emit: (type: string, object: Json, previousAttributes?: Json) => Promise<void>;
};
export type Handler = (ctx: Context, params: FormObject, id: string) => Promise<Json>;

/** GET /v1/<path>/:id for a stored object of one kind. */
const retrieve =
  (object: string, kind: string, view: (data: Json) => Json = (d) => d): Handler =>
  async (ctx, params, id) => {
    allowOnly(params, []);
    const data = await loadObject(ctx.tx, id, object);
    if (!data) throw noSuch(kind, id);
    return view(data);
  };

export type Route = { method: 'GET' | 'POST' | 'DELETE'; path: RegExp; handler: Handler };
const ID = '([A-Za-z0-9_]{1,100})';
const route = (method: Route['method'], path: string, handler: Handler): Route => ({
  method,
  path: new RegExp(`^/v1/${path.replace(':id', ID)}$`),
  handler,
});

export const ROUTES: Route[] = [
  route('POST', 'customers', createCustomer),
  route('GET', 'customers/:id', retrieve('customer', 'customer')),
  route('POST', 'checkout/sessions', createCheckoutSession),
  route('GET', 'checkout/sessions/:id', retrieve('checkout.session', 'checkout.session', sessionAsOfNow)),
  route('POST', 'billing_portal/sessions', createPortalSession),
  route('GET', 'subscriptions', listSubscriptions),
  route('GET', 'subscriptions/:id', retrieve('subscription', 'subscription')),
  route('POST', 'subscriptions/:id', updateSubscription),
  route('DELETE', 'subscriptions/:id', cancelSubscription),
  route('POST', 'subscription_items', createSubscriptionItem),
  route('GET', 'subscription_items/:id', retrieveSubscriptionItem),
  route('POST', 'subscription_items/:id', updateSubscriptionItem),
  route('DELETE', 'subscription_items/:id', deleteSubscriptionItem),
  route('GET', 'invoices/:id', retrieve('invoice', 'invoice')),
  route('GET', 'events/:id', retrieve('event', 'event')),
];
