// A local server that speaks the in-app purchase provider's v1 server API
// (RevenueCat shape): GET /v1/subscribers/{app_user_id} with a Bearer API
// key. Tests set each app user's subscriber; unknown ones answer 404, a wrong
// key 401. Nothing leaves 127.0.0.1.
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Test } from 'tap';

/** The `subscriber` object as the provider returns it (entitlements, subscriptions, and anything else). */
export type SubscriberJson = {
  original_app_user_id?: string;
  entitlements?: Record<
    string,
    {
      expires_date: string | null;
      purchase_date: string;
      product_identifier: string;
      grace_period_expires_date?: string | null;
    }
  >;
  subscriptions?: Record<
    string,
    {
      expires_date: string | null;
      billing_issues_detected_at: string | null;
      unsubscribe_detected_at: string | null;
      period_type: string;
      store: string;
      [k: string]: unknown;
    }
  >;
  [k: string]: unknown;
};

export type PurchaseServer = {
  url: string;
  apiKey: string;
  setSubscriber: (appUserId: string, subscriber: SubscriberJson) => void;
  removeSubscriber: (appUserId: string) => void;
  /** Answer every request with this HTTP status (an outage) until set back to null. */
  failWith: (status: number | null) => void;
  /** Requests received so far (any path, any key). */
  readonly requests: number;
};

export async function startPurchaseServer(t: Test): Promise<PurchaseServer> {
  const apiKey = `sk_test_${randomBytes(12).toString('hex')}`;
  const subscribers = new Map<string, SubscriberJson>();
  let requests = 0;
  let failure: number | null = null;

  const send = (res: http.ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  };

  const server = http.createServer((req, res) => {
    requests++;
    req.resume();
    if (failure !== null) return send(res, failure, { code: 7110, message: 'Service unavailable.' });
    if (req.headers.authorization !== `Bearer ${apiKey}`)
      return send(res, 401, { code: 7225, message: 'Invalid API Key.' });
    const match = /^\/v1\/subscribers\/([^/?]+)$/.exec(req.url ?? '');
    if (req.method !== 'GET' || !match) return send(res, 404, { code: 7000, message: 'Not found.' });
    const appUserId = decodeURIComponent(match[1]!);
    const subscriber = subscribers.get(appUserId);
    if (!subscriber) return send(res, 404, { code: 7259, message: 'Subscriber not found.' });
    const now = Date.now();
    send(res, 200, {
      request_date: new Date(now).toISOString().replace(/\.\d{3}Z$/, 'Z'),
      request_date_ms: now,
      subscriber: {
        original_app_user_id: appUserId,
        original_application_version: '1.0',
        original_purchase_date: null,
        management_url: null,
        first_seen: new Date(now - 86_400_000).toISOString(),
        last_seen: new Date(now).toISOString(),
        other_purchases: {},
        non_subscriptions: {},
        subscriber_attributes: {},
        entitlements: {},
        subscriptions: {},
        ...subscriber,
      },
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    apiKey,
    setSubscriber: (appUserId, subscriber) => subscribers.set(appUserId, subscriber),
    removeSubscriber: (appUserId) => subscribers.delete(appUserId),
    failWith: (status) => {
      failure = status;
    },
    get requests() {
      return requests;
    },
  };
}

/** A subscriber holding one entitlement through one store subscription (ISO dates; expires null = lifetime). */
export function subscriberWith(options: {
  entitlement: string;
  product?: string;
  expires: Date | null;
  purchased?: Date;
  graceUntil?: Date | null;
  billingIssueAt?: Date | null;
  unsubscribedAt?: Date | null;
  periodType?: 'normal' | 'trial' | 'intro';
}): SubscriberJson {
  const product = options.product ?? `com.example.${options.entitlement}.monthly`;
  const iso = (d: Date | null | undefined) => (d ? d.toISOString() : null);
  const purchased = options.purchased ?? new Date(Date.now() - 86_400_000);
  return {
    entitlements: {
      [options.entitlement]: {
        expires_date: iso(options.expires),
        grace_period_expires_date: iso(options.graceUntil),
        purchase_date: purchased.toISOString(),
        product_identifier: product,
      },
    },
    subscriptions: {
      [product]: {
        expires_date: iso(options.expires),
        purchase_date: purchased.toISOString(),
        original_purchase_date: purchased.toISOString(),
        billing_issues_detected_at: iso(options.billingIssueAt),
        unsubscribe_detected_at: iso(options.unsubscribedAt),
        grace_period_expires_date: iso(options.graceUntil),
        period_type: options.periodType ?? 'normal',
        store: 'app_store',
        is_sandbox: true,
        ownership_type: 'PURCHASED',
      },
    },
  };
}
