// The built-in billing sandbox: a small Stripe-compatible API that the
// official stripe SDK talks to, in-process (its fetch is `fetch` below) or
// over a local HTTP server in tests. Objects live in PostgreSQL, so api and
// worker processes share one sandbox. Each request runs in one transaction;
// the events it causes are delivered after that transaction commits.
import { createHash, timingSafeEqual } from 'node:crypto';
import type Stripe from 'stripe';
import type { DatabasePool, DatabaseTransactionConnection } from '../../db/pool.ts';
import { isDatabaseUnavailable } from '../../db/unavailable.ts';
import { decodeForm, FormDecodeError, type FormObject, type FormValue } from './form-decoding.ts';
import {
  newId,
  nowSeconds,
  SANDBOX_DATABASE_UNAVAILABLE,
  StripeApiError,
  type Json,
  type Subscription,
} from './objects.ts';
import { ROUTES, type Context } from './routes.ts';
import { completeSession, sessionAsOfNow, SESSION_TTL_S } from './sessions.ts';
import { cancelNow } from './subscriptions.ts';
import { stripeSdk } from '../stripe-sdk.ts';
import {
  claimIdempotencyKey,
  loadObject,
  publicView,
  saveObject,
  storeIdempotentResponse,
  subscriptionsOfCustomer,
} from './store.ts';

/** The API version of the SDK this sandbox answers for. */
const stripeApiVersion = () => stripeSdk().API_VERSION;

export type SandboxDelivery = (event: Stripe.Event) => Promise<void>;
export type SandboxOptions = {
  baseUrl: string;
  secretKey: string;
  prices: { pro: string; enterprise: string; agentAddon: string };
  deliver?: SandboxDelivery | undefined;
};

type Answer = { status: number; body: Json; replayed?: boolean };
type RequestInfo = { id: string | null; idempotency_key: string | null };

const digest = (value: string) => createHash('sha256').update(value).digest();

/** JSON with sorted keys: the same parameters in another order are the same request. */
function canonical(value: FormValue): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  return `{${Object.keys(value)
    .sort()
    .map((k) => `${JSON.stringify(k)}:${canonical(value[k]!)}`)
    .join(',')}}`;
}

/** Shows a key as Stripe does: its kind and last four characters, never the whole key. */
function maskKey(key: string): string {
  const kind = /^(sk|rk|pk)_(test|live)_/.exec(key)?.[0] ?? '';
  return key.length >= kind.length + 12 ? `${kind}${'*'.repeat(12)}${key.slice(-4)}` : '*'.repeat(12);
}

export class SandboxStripeApi {
  private readonly keyDigest: Buffer;

  constructor(
    private readonly db: DatabasePool,
    private readonly options: SandboxOptions,
  ) {
    this.keyDigest = digest(options.secretKey);
  }

  /** fetch-compatible handler (arrow property, so it can be passed around unbound). */
  fetch = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const requestId = newId('req_');
    let answer: Answer;
    let idempotencyKey: string | null = null;
    try {
      const request = new Request(input, init);
      idempotencyKey = request.method === 'POST' ? request.headers.get('idempotency-key') : null;
      answer = await this.handle(request, requestId, idempotencyKey);
    } catch (error) {
      answer =
        error instanceof StripeApiError
          ? { status: error.status, body: { error: error.body } }
          : isDatabaseUnavailable(error)
            ? // Its database is ours: the caller answers as for any outage (503), not as for Stripe failing.
              {
                status: 503,
                body: {
                  error: {
                    type: 'api_error',
                    code: SANDBOX_DATABASE_UNAVAILABLE,
                    message: 'The billing sandbox could not reach the database.',
                  },
                },
              }
            : {
                status: 500,
                body: {
                  error: { type: 'api_error', message: `The billing sandbox failed: ${(error as Error).message}` },
                },
              };
    }
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      'request-id': requestId,
      'stripe-version': stripeApiVersion(),
    };
    if (idempotencyKey) headers['idempotency-key'] = idempotencyKey;
    if (answer.replayed) headers['idempotent-replayed'] = 'true';
    return new Response(JSON.stringify(answer.body), { status: answer.status, headers });
  };

  private async handle(request: Request, requestId: string, idempotencyKey: string | null): Promise<Answer> {
    this.authenticate(request.headers.get('authorization'));
    const url = new URL(request.url);
    const method = request.method.toUpperCase();
    const match = ROUTES.map((r) => ({ r, m: r.method === method ? r.path.exec(url.pathname) : null })).find(
      (x) => x.m,
    );
    if (!match) {
      throw new StripeApiError(404, {
        type: 'invalid_request_error',
        message: `Unrecognized request URL (${method}: ${url.pathname}).`,
      });
    }
    // The SDK sends GET and DELETE parameters in the query, POST ones in the body.
    const raw = method === 'POST' ? await request.text() : url.search.slice(1);
    let params: FormObject;
    try {
      params = decodeForm(raw);
    } catch (error) {
      if (error instanceof FormDecodeError)
        throw new StripeApiError(400, { type: 'invalid_request_error', message: error.message });
      throw error;
    }
    if (idempotencyKey !== null && (idempotencyKey.length === 0 || idempotencyKey.length > 255)) {
      throw new StripeApiError(400, {
        type: 'invalid_request_error',
        message: 'Idempotency keys must be 1 to 255 characters long.',
      });
    }
    const fingerprint = digest(`${method} ${url.pathname}\n${canonical(params)}`).toString('hex');
    const id = match.m![1] ?? '';
    const { result, events } = await this.inTransaction(
      { id: requestId, idempotency_key: idempotencyKey },
      async (ctx): Promise<Answer> => {
        if (idempotencyKey) {
          const stored = await claimIdempotencyKey(ctx.tx, idempotencyKey, fingerprint);
          if (stored && stored.fingerprint !== fingerprint) {
            throw new StripeApiError(400, {
              type: 'idempotency_error',
              message: `Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than '${idempotencyKey}' if you meant to execute a different request.`,
            });
          }
          if (stored) return { status: stored.status, body: stored.response, replayed: true };
        }
        const body = publicView(await match.r.handler(ctx, params, id));
        // Only successes are kept: a refused request may be corrected and sent again with its key.
        if (idempotencyKey) await storeIdempotentResponse(ctx.tx, idempotencyKey, 200, body);
        return { status: 200, body };
      },
    );
    await this.deliver(events);
    return result;
  }

  private authenticate(header: string | null) {
    const key = /^Bearer\s+(\S+)$/i.exec(header ?? '')?.[1];
    if (!key) {
      throw new StripeApiError(401, {
        type: 'invalid_request_error',
        message: 'You did not provide an API key. Send it as "Authorization: Bearer sk_...".',
      });
    }
    if (!timingSafeEqual(digest(key), this.keyDigest)) {
      throw new StripeApiError(401, {
        type: 'invalid_request_error',
        message: `Invalid API Key provided: ${maskKey(key)}`,
      });
    }
  }

  /**
   * Runs `work` in a transaction and returns the events it emitted, to be
   * delivered after the commit (a receiver then reads committed state, and
   * a slow receiver holds no locks). Events are collected afresh if the
   * transaction is retried.
   */
  private async inTransaction<T>(
    request: RequestInfo,
    work: (ctx: Context) => Promise<T>,
  ): Promise<{ result: T; events: Stripe.Event[] }> {
    let events: Stripe.Event[] = [];
    const result = await this.db.transaction(async (tx: DatabaseTransactionConnection) => {
      events = [];
      const emit: Context['emit'] = async (type, object, previous) => {
        const event = {
          id: newId('evt_'),
          object: 'event',
          api_version: stripeApiVersion(),
          created: nowSeconds(),
          // A copy: the object may change again later in this transaction.
          data: {
            object: publicView(structuredClone(object)),
            ...(previous && Object.keys(previous).length > 0 ? { previous_attributes: structuredClone(previous) } : {}),
          },
          livemode: false,
          pending_webhooks: 1,
          request,
          type,
        };
        await saveObject(tx, event);
        events.push(event as unknown as Stripe.Event);
      };
      return work({ tx, baseUrl: this.options.baseUrl, prices: this.options.prices, emit });
    });
    return { result, events };
  }

  /** Delivery is the receiver's business: a refusal or failure there changes nothing here. */
  private async deliver(events: Stripe.Event[]) {
    for (const event of events) {
      try {
        await this.options.deliver?.(event);
      } catch {
        // ignored on purpose (see above)
      }
    }
  }

  // ------------------------------------------------------------ for the sandbox pages

  private readonly pageRequest: RequestInfo = { id: null, idempotency_key: null };

  async checkoutSession(id: string): Promise<Stripe.Checkout.Session | null> {
    const session = await loadObject(this.db, id, 'checkout.session');
    return session ? (publicView(sessionAsOfNow(session)) as unknown as Stripe.Checkout.Session) : null;
  }

  /** The "Pay" button. Paying twice (a double click) creates one subscription. */
  async completeCheckout(id: string): Promise<{ redirect: string } | null> {
    const { result, events } = await this.inTransaction(this.pageRequest, async (ctx) => {
      const session = await loadObject<Json & { id: string; object: string }>(ctx.tx, id, 'checkout.session', {
        lock: true,
      });
      if (!session || sessionAsOfNow(session).status === 'expired') return null;
      if (session.status === 'open') await completeSession(ctx, session);
      return { redirect: String(session.success_url).replaceAll('{CHECKOUT_SESSION_ID}', id) };
    });
    await this.deliver(events);
    return result;
  }

  /** The "Cancel" button: back to the app; the session stays open until it expires, as on Stripe. */
  async cancelCheckout(id: string): Promise<{ redirect: string } | null> {
    const session = await this.checkoutSession(id);
    if (!session || session.status === 'expired') return null;
    return { redirect: session.cancel_url ?? `${this.options.baseUrl}/billing/return?checkout=cancelled` };
  }

  async portalSession(id: string): Promise<Stripe.BillingPortal.Session | null> {
    const session = await loadObject(this.db, id, 'billing_portal.session');
    if (!session || (session.created as number) + SESSION_TTL_S < nowSeconds()) return null;
    return session as unknown as Stripe.BillingPortal.Session;
  }

  /** All of a customer's subscriptions, canceled ones too, newest first. */
  async subscriptionsOf(customerId: string): Promise<Stripe.Subscription[]> {
    const subs = await subscriptionsOfCustomer(this.db, { customer: customerId, status: 'all', limit: 100 });
    return subs as unknown as Stripe.Subscription[];
  }

  /** The portal's "Cancel subscription": ends it now; customer.subscription.deleted follows. */
  async cancelSubscription(subscriptionId: string): Promise<Stripe.Subscription | null> {
    const { result, events } = await this.inTransaction(this.pageRequest, async (ctx) => {
      const sub = await loadObject<Json>(ctx.tx, subscriptionId, 'subscription', { lock: true });
      if (!sub) return null;
      return sub.status === 'canceled' ? sub : cancelNow(ctx, sub as Subscription);
    });
    await this.deliver(events);
    return result as unknown as Stripe.Subscription | null;
  }
}
