// Customers, Checkout and the customer portal: the sessions a person pays
// or manages billing through, and what "Pay" does.
import {
  addMonth,
  allowOnly,
  integer,
  invalid,
  itemsList,
  knownPrice,
  list,
  listParam,
  mergeMetadata,
  newId,
  noSuch,
  nowSeconds,
  subscriptionItem,
  text,
  type Json,
  type Subscription,
} from './objects.ts';
import type { Context, Handler } from './routes.ts';
import { loadObject, saveObject } from './store.ts';

/** How long a checkout or portal link stays usable. */
export const SESSION_TTL_S = 24 * 3600;

function url(value: string | null, param: string): string | null {
  if (value === null) return null;
  try {
    if (/^https?:$/.test(new URL(value).protocol)) return value;
  } catch {
    /* answered below */
  }
  throw invalid(`Not a valid URL: ${param}`, param);
}

export async function existingCustomer(ctx: Context, id: string, param?: string): Promise<Json> {
  const customer = await loadObject(ctx.tx, id, 'customer');
  if (!customer) throw noSuch('customer', id, param);
  return customer;
}

/** Checkout sessions expire as Stripe's do; reading one past its time shows it expired. */
export function sessionAsOfNow<T extends Json>(session: T): T {
  return session.status === 'open' && (session.expires_at as number) < nowSeconds()
    ? { ...session, status: 'expired', url: null }
    : session;
}

// ------------------------------------------------------------ customers

export const createCustomer: Handler = async (ctx, params) => {
  allowOnly(params, ['email', 'name', 'description', 'phone', 'metadata']);
  const customer = {
    id: newId('cus_'),
    object: 'customer',
    address: null,
    balance: 0,
    created: nowSeconds(),
    currency: null,
    default_source: null,
    delinquent: false,
    description: text(params, 'description'),
    discount: null,
    email: text(params, 'email', { max: 512 }),
    invoice_prefix: newId('').slice(0, 8).toUpperCase(),
    invoice_settings: { custom_fields: null, default_payment_method: null, footer: null, rendering_options: null },
    livemode: false,
    metadata: mergeMetadata({}, params),
    name: text(params, 'name', { max: 256 }),
    phone: text(params, 'phone'),
    preferred_locales: [],
    shipping: null,
    tax_exempt: 'none',
    test_clock: null,
  };
  await saveObject(ctx.tx, customer);
  return customer;
};

// ------------------------------------------------------------ checkout and portal

export const createCheckoutSession: Handler = async (ctx, params) => {
  allowOnly(params, [
    'mode',
    'customer',
    'customer_email',
    'client_reference_id',
    'line_items',
    'success_url',
    'cancel_url',
    'metadata',
    'subscription_data',
    'allow_promotion_codes',
    'billing_address_collection',
    'locale',
    'payment_method_types',
  ]);
  const mode = text(params, 'mode', { required: true });
  if (mode !== 'subscription') throw invalid('The billing sandbox supports only mode=subscription.', 'mode');
  const customer = text(params, 'customer');
  if (customer) await existingCustomer(ctx, customer, 'customer');
  const entries = listParam(params, 'line_items');
  if (entries.length === 0) throw invalid('Missing required param: line_items.', 'line_items');
  const lineItems = entries.map((entry, i) => {
    allowOnly(entry, ['price', 'quantity'], `line_items[${i}]`);
    const price = knownPrice(
      ctx.prices,
      text(entry, 'price', { required: true, param: `line_items[${i}][price]` })!,
      `line_items[${i}][price]`,
    );
    const quantity = integer(entry, 'quantity', `line_items[${i}][quantity]`) ?? 1;
    if (quantity < 1) throw invalid('Quantity must be at least 1.', `line_items[${i}][quantity]`);
    const amount = (price.unit_amount as number) * quantity;
    return {
      id: newId('li_'),
      object: 'item',
      amount_discount: 0,
      amount_subtotal: amount,
      amount_tax: 0,
      amount_total: amount,
      currency: 'usd',
      description: price.nickname,
      price,
      quantity,
    };
  });
  const subscriptionData = params.subscription_data === undefined ? {} : params.subscription_data;
  if (typeof subscriptionData !== 'object' || Array.isArray(subscriptionData))
    throw invalid('Invalid object: subscription_data', 'subscription_data');
  allowOnly(subscriptionData, ['metadata', 'description'], 'subscription_data');
  const id = newId('cs_test_');
  const created = nowSeconds();
  const total = lineItems.reduce((sum, item) => sum + item.amount_total, 0);
  const session = {
    id,
    object: 'checkout.session',
    after_expiration: null,
    allow_promotion_codes: null,
    amount_subtotal: total,
    amount_total: total,
    billing_address_collection: null,
    cancel_url: url(text(params, 'cancel_url', { max: 5000 }), 'cancel_url'),
    client_reference_id: text(params, 'client_reference_id', { max: 200 }),
    created,
    currency: 'usd',
    customer,
    customer_details: null,
    customer_email: customer ? null : text(params, 'customer_email', { max: 512 }),
    expires_at: created + SESSION_TTL_S,
    invoice: null,
    line_items: list(lineItems, `/v1/checkout/sessions/${id}/line_items`),
    livemode: false,
    locale: null,
    metadata: mergeMetadata({}, params),
    mode,
    payment_intent: null,
    payment_method_types: ['card'],
    payment_status: 'unpaid',
    status: 'open',
    submit_type: null,
    subscription: null,
    success_url: url(text(params, 'success_url', { required: true, max: 5000 }), 'success_url'),
    ui_mode: 'hosted',
    url: `${ctx.baseUrl}/billing/sandbox/checkout/${id}`,
    // Stripe keeps subscription_data out of the session; the sandbox needs it at payment.
    _sandbox: { subscription_metadata: mergeMetadata({}, subscriptionData) },
  };
  await saveObject(ctx.tx, session);
  return session;
};

export const createPortalSession: Handler = async (ctx, params) => {
  allowOnly(params, ['customer', 'return_url', 'configuration', 'locale']);
  const customer = text(params, 'customer', { required: true })!;
  await existingCustomer(ctx, customer, 'customer');
  const id = newId('bps_');
  const session = {
    id,
    object: 'billing_portal.session',
    configuration: 'bpc_sandbox',
    created: nowSeconds(),
    customer,
    flow: null,
    livemode: false,
    locale: null,
    on_behalf_of: null,
    return_url: url(text(params, 'return_url', { max: 5000 }), 'return_url'),
    url: `${ctx.baseUrl}/billing/sandbox/portal/${id}`,
  };
  await saveObject(ctx.tx, session);
  return session;
};

/** The "Pay" button: a subscription from the session's line items, paid at once. */
export async function completeSession(ctx: Context, session: Json & { id: string; object: string }): Promise<void> {
  const created = nowSeconds();
  const period = { start: created, end: addMonth(created) };
  let customer = session.customer as string | null;
  if (!customer) {
    customer = newId('cus_');
    await saveObject(ctx.tx, {
      id: customer,
      object: 'customer',
      created,
      email: session.customer_email ?? null,
      livemode: false,
      metadata: {},
      name: null,
    });
  }
  const subId = newId('sub_');
  const lines = (session.line_items as { data: { price: Json & { id: string }; quantity: number }[] }).data;
  const items = lines.map((line) => subscriptionItem(subId, line.price, line.quantity, period));
  const metadata =
    (session._sandbox as { subscription_metadata?: Record<string, string> } | undefined)?.subscription_metadata ?? {};
  const invoiceId = newId('in_');
  const sub: Subscription = {
    id: subId,
    object: 'subscription',
    application: null,
    billing_cycle_anchor: created,
    cancel_at: null,
    cancel_at_period_end: false,
    canceled_at: null,
    cancellation_details: { comment: null, feedback: null, reason: null },
    collection_method: 'charge_automatically',
    created,
    currency: 'usd',
    customer,
    default_payment_method: null,
    description: null,
    discounts: [],
    ended_at: null,
    items: itemsList(subId, items),
    latest_invoice: invoiceId,
    livemode: false,
    metadata,
    pending_update: null,
    schedule: null,
    start_date: created,
    status: 'active',
    test_clock: null,
    trial_end: null,
    trial_start: null,
  };
  const amount = items.reduce((sum, item) => sum + (item.price.unit_amount as number) * item.quantity, 0);
  const invoice = {
    id: invoiceId,
    object: 'invoice',
    amount_due: amount,
    amount_paid: amount,
    amount_remaining: 0,
    billing_reason: 'subscription_create',
    collection_method: 'charge_automatically',
    created,
    currency: 'usd',
    customer,
    livemode: false,
    metadata: {},
    lines: list(
      items.map((item) => ({
        id: newId('il_'),
        object: 'line_item',
        amount: (item.price.unit_amount as number) * item.quantity,
        currency: 'usd',
        description: `${item.quantity} × ${String(item.price.nickname)}`,
        period,
        quantity: item.quantity,
        pricing: { type: 'price_details', price_details: { price: item.price.id, product: item.price.product } },
      })),
      `/v1/invoices/${invoiceId}/lines`,
    ),
    parent: {
      type: 'subscription_details',
      quote_details: null,
      subscription_details: { metadata, subscription: subId },
    },
    period_end: period.start,
    period_start: period.start,
    status: 'paid',
    status_transitions: { paid_at: created, finalized_at: created },
  };
  const completed = {
    ...session,
    customer,
    payment_status: 'paid',
    status: 'complete',
    subscription: subId,
    url: null,
  };
  await saveObject(ctx.tx, sub);
  await saveObject(ctx.tx, invoice);
  await saveObject(ctx.tx, completed);
  await ctx.emit('customer.subscription.created', sub);
  await ctx.emit('checkout.session.completed', completed);
  await ctx.emit('invoice.paid', invoice);
}
