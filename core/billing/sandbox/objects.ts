// The sandbox's Stripe objects: ids, errors, the price catalogue, reading
// request parameters, and the shapes of what it stores and answers. Objects
// are plain JSON, shaped like Stripe's for the SDK's API version (periods
// live on subscription items).
import { randomBytes } from 'node:crypto';
import type { FormObject, FormValue } from './form-decoding.ts';

export type Json = Record<string, unknown>;
export type ErrorBody = { type: string; message: string; code?: string; param?: string };

/** A refusal answered as Stripe does: `{error: {...}}` with an HTTP status. */
export class StripeApiError extends Error {
  override name = 'StripeApiError';
  constructor(
    readonly status: number,
    readonly body: ErrorBody,
  ) {
    super(body.message);
  }
}

export const invalid = (message: string, param?: string) =>
  new StripeApiError(400, { type: 'invalid_request_error', message, ...(param ? { param } : {}) });

/** An id that names nothing: 404 in the path, 400 when it came as a parameter. */
export const noSuch = (kind: string, id: string, param?: string) =>
  new StripeApiError(param ? 400 : 404, {
    type: 'invalid_request_error',
    code: 'resource_missing',
    param: param ?? 'id',
    message: `No such ${kind}: '${id}'`,
  });

// ------------------------------------------------------------ ids, time

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

/** Stripe-like ids: a prefix and 24 random base62 characters (unguessable: the pages trust them). */
export function newId(prefix: string): string {
  const bytes = randomBytes(24);
  let out = prefix;
  for (const b of bytes) out += ALPHABET[b % 62];
  return out;
}

export const nowSeconds = () => Math.floor(Date.now() / 1000);

/** One calendar month later; the 31st becomes the last day of a shorter month. */
export function addMonth(unix: number): number {
  const d = new Date(unix * 1000);
  const day = d.getUTCDate();
  d.setUTCMonth(d.getUTCMonth() + 1);
  if (d.getUTCDate() !== day) d.setUTCDate(0);
  return Math.floor(d.getTime() / 1000);
}

// ------------------------------------------------------------ prices

export type SandboxPrices = { pro: string; enterprise: string; agentAddon: string };

const CATALOGUE = {
  pro: { nickname: 'Pro', unit_amount: 2900 },
  enterprise: { nickname: 'Enterprise', unit_amount: 29900 },
  agentAddon: { nickname: 'Agent add-on', unit_amount: 900 },
} as const;

/** The price object for a configured price id; null for any other id. */
export function priceObject(prices: SandboxPrices, id: string): Json | null {
  const plan = (Object.keys(CATALOGUE) as (keyof typeof CATALOGUE)[]).find((k) => prices[k] === id);
  if (!plan) return null;
  const { nickname, unit_amount } = CATALOGUE[plan];
  return {
    id,
    object: 'price',
    active: true,
    billing_scheme: 'per_unit',
    created: 0,
    currency: 'usd',
    livemode: false,
    lookup_key: null,
    metadata: {},
    nickname,
    product: `prod_sandbox_${plan}`,
    tax_behavior: 'unspecified',
    recurring: { interval: 'month', interval_count: 1, usage_type: 'licensed', meter: null, trial_period_days: null },
    type: 'recurring',
    unit_amount,
    unit_amount_decimal: String(unit_amount),
  };
}

/** A configured price, or the refusal Stripe gives for an unknown one. */
export function knownPrice(prices: SandboxPrices, id: string, param: string): Json & { id: string } {
  const price = priceObject(prices, id);
  if (!price) throw noSuch('price', id, param);
  return price as Json & { id: string };
}

// ------------------------------------------------------------ parameters

/** Refuses parameters the endpoint does not know, as Stripe does (catches typos in our own calls). */
export function allowOnly(params: FormObject, names: readonly string[], parent = '') {
  for (const key of Object.keys(params)) {
    const param = parent ? `${parent}[${key}]` : key;
    if (key !== 'expand' && !names.includes(key)) throw invalid(`Received unknown parameter: ${param}`, param);
  }
}

export function text(
  params: FormObject,
  name: string,
  options: { required?: boolean; max?: number; param?: string } = {},
): string | null {
  const value = params[name];
  const param = options.param ?? name;
  if (value === undefined || value === '') {
    if (options.required) throw invalid(`Missing required param: ${param}.`, param);
    return null;
  }
  if (typeof value !== 'string') throw invalid(`Invalid string: ${param}`, param);
  if (value.length > (options.max ?? 5000)) throw invalid(`Invalid string: ${param} is too long`, param);
  return value;
}

export function integer(params: FormObject, name: string, param = name): number | null {
  const value = text(params, name, { param, max: 12 });
  if (value === null) return null;
  if (!/^\d+$/.test(value)) throw invalid(`Invalid integer: ${value}`, param);
  return Number(value);
}

export function boolean(params: FormObject, name: string, param = name): boolean | null {
  const value = text(params, name, { param, max: 5 });
  if (value === null) return null;
  if (value !== 'true' && value !== 'false') throw invalid(`Invalid boolean: ${value}`, param);
  return value === 'true';
}

export function objectParam(params: FormObject, name: string, param = name): FormObject | null {
  const value = params[name];
  if (value === undefined || value === '') return null;
  if (typeof value === 'string') throw invalid(`Invalid object: ${param}`, param);
  // `metadata[0]=x` decodes as an array; metadata keys are strings all the same.
  return Array.isArray(value) ? Object.fromEntries(value.map((v, i) => [String(i), v])) : value;
}

export function listParam(params: FormObject, name: string): FormObject[] {
  const value = params[name];
  if (value === undefined || value === '') return [];
  if (!Array.isArray(value)) throw invalid(`Invalid array: ${name}`, name);
  return value.map((v, i) => {
    if (typeof v !== 'object' || Array.isArray(v)) throw invalid(`Invalid object: ${name}[${i}]`, `${name}[${i}]`);
    return v;
  });
}

/**
 * Metadata as Stripe merges it: each given key is set, a key given as ''
 * is removed, and `metadata=` clears everything.
 */
export function mergeMetadata(
  current: Record<string, string>,
  params: FormObject,
  name = 'metadata',
): Record<string, string> {
  if (params[name] === '') return {};
  const given = objectParam(params, name);
  if (!given) return current;
  const next: Record<string, string> = { ...current };
  for (const [key, value] of Object.entries(given as Record<string, FormValue>)) {
    if (typeof value !== 'string') throw invalid(`Invalid metadata value: ${name}[${key}]`, `${name}[${key}]`);
    if (key.length > 40)
      throw invalid(`Metadata keys can be at most 40 characters: ${name}[${key.slice(0, 40)}]`, name);
    if (value.length > 500)
      throw invalid(`Metadata values can be at most 500 characters: ${name}[${key}]`, `${name}[${key}]`);
    if (value === '') delete next[key];
    else next[key] = value;
  }
  if (Object.keys(next).length > 50) throw invalid('Metadata can have at most 50 keys.', name);
  return next;
}

// ------------------------------------------------------------ shapes

export const list = (data: unknown[], url: string, hasMore = false) => ({
  object: 'list',
  data,
  has_more: hasMore,
  url,
});

export type Subscription = Json & {
  id: string;
  object: string;
  customer: string;
  status: string;
  metadata: Record<string, string>;
  items: { object: 'list'; data: SubscriptionItem[]; has_more: boolean; url: string; total_count: number };
};
export type SubscriptionItem = Json & {
  id: string;
  price: Json & { id: string };
  quantity: number;
  current_period_start: number;
  current_period_end: number;
};

export function subscriptionItem(
  subscriptionId: string,
  price: Json & { id: string },
  quantity: number,
  period: { start: number; end: number },
): SubscriptionItem {
  return {
    id: newId('si_'),
    object: 'subscription_item',
    created: nowSeconds(),
    metadata: {},
    discounts: [],
    tax_rates: [],
    billing_thresholds: null,
    plan: null,
    price,
    quantity,
    current_period_start: period.start,
    current_period_end: period.end,
    subscription: subscriptionId,
  };
}

export function itemsList(subscriptionId: string, items: SubscriptionItem[]): Subscription['items'] {
  return {
    object: 'list',
    data: items,
    has_more: false,
    total_count: items.length,
    url: `/v1/subscription_items?subscription=${subscriptionId}`,
  };
}

/** The period every item of the subscription shares (items added later join the current one). */
export function periodOf(sub: Subscription): { start: number; end: number } {
  const first = sub.items.data[0];
  const start = first?.current_period_start ?? nowSeconds();
  return { start, end: first?.current_period_end ?? addMonth(start) };
}

/** The top-level fields that changed, with their old values (an event's previous_attributes). */
export function previousAttributes(before: Json, after: Json): Json {
  const changed: Json = {};
  for (const key of Object.keys(after)) {
    if (JSON.stringify(before[key]) !== JSON.stringify(after[key])) changed[key] = before[key] ?? null;
  }
  return changed;
}

/** The error code of a sandbox answer whose cause is PostgreSQL being away (core/billing/checkout.ts answers 503 for it). */
export const SANDBOX_DATABASE_UNAVAILABLE = 'sandbox_database_unavailable';
