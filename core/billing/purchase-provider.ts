// The in-app purchase provider (RevenueCat-style server API, v1): reads one
// subscriber and says what its entitlements grant.
//
// Identity: the iOS app logs in to the provider with app user id = the
// tenant id (a UUID, exactly as our API returns it: lowercase, since the
// provider's ids are case-sensitive), so the provider's subscriber IS the
// tenant, and the webhook's app_user_id names the tenant directly. Entitlement identifiers
// map to plans through PURCHASE_ENTITLEMENT_PRO / PURCHASE_ENTITLEMENT_ENTERPRISE
// (config.billing.purchase.entitlements); the highest active one wins.
//
//   GET {PURCHASE_API_BASE}/v1/subscribers/{app_user_id}
//   Authorization: Bearer {PURCHASE_API_KEY}
//   → { request_date_ms, subscriber: { original_app_user_id,
//        entitlements:  { <entitlement id>: { expires_date, purchase_date, product_identifier, grace_period_expires_date } },
//        subscriptions: { <product id>: { expires_date, billing_issues_detected_at, unsubscribe_detected_at, period_type, store } } } }
//
// 404 = no such subscriber (nothing granted); 401/403 = our API key is wrong
// (a configuration error, never retried); 429, 5xx, timeouts and network
// errors are transient.
import { z } from 'zod';
import type { Config } from '../config.ts';
import type { PlanName } from '../plans.ts';
import { storableJson } from '../storable.ts';

/** Every call to the provider ends within this time. */
export const PURCHASE_TIMEOUT_MS = 15_000;

export type PurchaseProviderErrorKind = 'not_configured' | 'unauthorized' | 'unavailable' | 'rejected';

/** Why the provider could not be read; `code` is what clients and jobs see. */
export class PurchaseProviderError extends Error {
  override name = 'PurchaseProviderError';
  constructor(
    readonly kind: PurchaseProviderErrorKind,
    readonly code: string,
    message: string,
    readonly httpStatus?: number,
  ) {
    super(message);
  }
}

const isoDate = z.string().refine((v) => !Number.isNaN(Date.parse(v)), 'must be an ISO-8601 date');
const optionalDate = isoDate.nullable().optional();

const EntitlementInfo = z.looseObject({
  /** null: a lifetime (non-expiring) entitlement. */
  expires_date: optionalDate,
  purchase_date: optionalDate,
  product_identifier: z.string().optional(),
  grace_period_expires_date: optionalDate,
});

const SubscriptionInfo = z.looseObject({
  expires_date: optionalDate,
  billing_issues_detected_at: optionalDate,
  unsubscribe_detected_at: optionalDate,
  period_type: z.string().nullable().optional(),
  store: z.string().nullable().optional(),
});

export const Subscriber = z.looseObject({
  original_app_user_id: z.string().optional(),
  entitlements: z.record(z.string(), EntitlementInfo).default({}),
  subscriptions: z.record(z.string(), SubscriptionInfo).default({}),
});
export type Subscriber = z.infer<typeof Subscriber>;

export const SubscriberResponse = z.looseObject({
  request_date_ms: z.number().optional(),
  subscriber: Subscriber,
});
export type SubscriberResponse = z.infer<typeof SubscriberResponse>;

/** The API key, or a not_configured error naming the setting. */
export function purchaseApiKey(config: Config): string {
  const key = config.billing.purchase.apiKey;
  if (!key) {
    throw new PurchaseProviderError(
      'not_configured',
      'billing_not_configured',
      'In-app purchases are not configured on this deployment: set PURCHASE_API_KEY (the secret API key of the in-app purchase provider).',
    );
  }
  return key;
}

/**
 * The subscriber as the provider has it now; null when the provider has no
 * such app user. Throws PurchaseProviderError for everything else.
 */
export async function fetchSubscriber(config: Config, appUserId: string): Promise<SubscriberResponse | null> {
  const apiKey = purchaseApiKey(config);
  const url = `${config.billing.purchase.apiBase}/v1/subscribers/${encodeURIComponent(appUserId)}`;
  let response: Response;
  let body: unknown;
  try {
    response = await fetch(url, {
      headers: { authorization: `Bearer ${apiKey}`, accept: 'application/json' },
      signal: AbortSignal.timeout(PURCHASE_TIMEOUT_MS),
    });
    if (response.status === 404) {
      await response.body?.cancel();
      return null;
    }
    // Made storable: its product identifiers reach text columns.
    body = response.ok ? storableJson(await response.json().catch(() => undefined)) : await response.body?.cancel();
  } catch (error) {
    const timedOut = (error as Error).name === 'TimeoutError';
    throw new PurchaseProviderError(
      'unavailable',
      'purchase_provider_unavailable',
      timedOut
        ? `The in-app purchase provider did not answer within ${PURCHASE_TIMEOUT_MS / 1000} s.`
        : `The in-app purchase provider could not be reached: ${(error as Error).message}.`,
    );
  }
  const status = response.status;
  if (status === 401 || status === 403) {
    throw new PurchaseProviderError(
      'unauthorized',
      'purchase_provider_auth_failed',
      `The in-app purchase provider refused PURCHASE_API_KEY (HTTP ${status}); set its secret server API key.`,
      status,
    );
  }
  if (status === 429 || status >= 500) {
    throw new PurchaseProviderError(
      'unavailable',
      'purchase_provider_unavailable',
      `The in-app purchase provider answered HTTP ${status}; try again later.`,
      status,
    );
  }
  if (!response.ok) {
    throw new PurchaseProviderError(
      'rejected',
      'purchase_provider_error',
      `The in-app purchase provider refused the request (HTTP ${status}).`,
      status,
    );
  }
  const parsed = SubscriberResponse.safeParse(body);
  if (!parsed.success) {
    throw new PurchaseProviderError(
      'unavailable',
      'purchase_provider_invalid_response',
      `The in-app purchase provider answered something that is not a subscriber: ${parsed.error.issues[0]?.path.join('.') || 'body'}: ${parsed.error.issues[0]?.message ?? 'invalid'}.`,
      status,
    );
  }
  return parsed.data;
}

export type PurchaseStatus = 'active' | 'trialing' | 'past_due' | 'canceled';

/** What the subscriber's entitlements grant, in the terms of billing_entitlements. */
export type PurchaseState = {
  plan: PlanName;
  status: PurchaseStatus;
  /** When the grant ends by itself (the end of a grace period when in one); null = lifetime, or nothing granted. */
  expiresAt: Date | null;
  /** End of the paid period. */
  currentPeriodEnd: Date | null;
  /** The store product behind the entitlement. */
  externalRef: string | null;
  /** Our entitlement identifier this state comes from; null when the subscriber has none of ours (active or not). */
  entitlementId: string | null;
  /** false once the person turned auto-renew off; null without a renewing subscription (lifetime). */
  willRenew: boolean | null;
};

const at = (v: string | null | undefined): number | null => (v ? Date.parse(v) : null);

/**
 * The plan a subscriber is entitled to at `now`: the highest of our
 * entitlements that has not expired (a lifetime one, expires_date null,
 * never does; a billing grace period keeps it as past_due). Without one:
 * plan free, status canceled, with the most recently expired entitlement's
 * dates and product.
 */
export function entitlementFromSubscriber(
  config: Config,
  subscriber: Subscriber,
  now: Date = new Date(),
): PurchaseState {
  const ids = config.billing.purchase.entitlements;
  const nowMs = now.getTime();
  const ours = (['enterprise', 'pro'] as const)
    .map((plan) => ({ plan, id: ids[plan], info: subscriber.entitlements[ids[plan]] }))
    .filter(
      (e): e is { plan: 'enterprise' | 'pro'; id: string; info: NonNullable<typeof e.info> } => e.info !== undefined,
    );

  for (const { plan, id, info } of ours) {
    const expires = at(info.expires_date);
    const grace = at(info.grace_period_expires_date);
    const inGrace = expires !== null && expires <= nowMs && grace !== null && grace > nowMs;
    if (expires !== null && expires <= nowMs && !inGrace) continue;
    const product = info.product_identifier ?? null;
    const subscription = product ? subscriber.subscriptions[product] : undefined;
    const billingIssue = !!subscription?.billing_issues_detected_at;
    const status: PurchaseStatus =
      inGrace || billingIssue ? 'past_due' : subscription?.period_type === 'trial' ? 'trialing' : 'active';
    return {
      plan,
      status,
      expiresAt: expires === null ? null : new Date(Math.max(expires, grace ?? 0)),
      currentPeriodEnd: expires === null ? null : new Date(expires),
      externalRef: product,
      entitlementId: id,
      willRenew: subscription && expires !== null ? !subscription.unsubscribe_detected_at : null,
    };
  }

  // Nothing active: report the entitlement that ended last.
  const ended = ours
    .map((e) => ({ ...e, expires: at(e.info.expires_date) ?? 0 }))
    .sort((a, b) => b.expires - a.expires)[0];
  return {
    plan: 'free',
    status: 'canceled',
    expiresAt: ended ? new Date(ended.expires) : null,
    currentPeriodEnd: ended ? new Date(ended.expires) : null,
    externalRef: ended?.info.product_identifier ?? null,
    entitlementId: ended?.id ?? null,
    willRenew: ended ? false : null,
  };
}
