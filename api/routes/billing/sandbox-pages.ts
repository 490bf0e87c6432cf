// The billing sandbox's own pages (development only): what Stripe's hosted
// Checkout and customer portal would show, as plain HTML forms with no
// script. "Pay" completes the checkout in the sandbox, whose events reach
// /api/billing/webhook like Stripe's. The unguessable session id in the path
// is the only credential, as with Stripe's own links.
import formbody from '@fastify/formbody';
import type { FastifyError, FastifyReply } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type Stripe from 'stripe';
import { z } from 'zod';
import { pageFailure } from '../../pages/errors.ts';
import { html, sendPage as sendLayoutPage, type Html } from '../../pages/layout.ts';

const Id = z.string().regex(/^[a-z]+_[A-Za-z0-9_]{8,80}$/);
const SessionParams = z.object({ id: Id });
const CancelParams = z.object({ id: Id, subId: Id });
const ReturnQuery = z.object({ checkout: z.string().max(32).optional(), portal: z.string().max(32).optional() });

const ENDED = ['canceled', 'incomplete_expired'];
const money = (cents: number | null | undefined) => `$${((cents ?? 0) / 100).toFixed(2)}`;
const day = (unix: number | null | undefined) => (unix ? new Date(unix * 1000).toISOString().slice(0, 10) : '—');

/**
 * One layout for every sandbox page. Form posts may redirect to the app's
 * success or cancel URL, so those origins are allowed as form targets too.
 */
function sendPage(
  reply: FastifyReply,
  status: number,
  title: string,
  body: Html,
  redirectTargets: (string | null | undefined)[] = [],
  sandbox = true,
): FastifyReply {
  const notice = sandbox
    ? html`<p class="notice">Billing sandbox — no real payment. Nothing is charged.</p>`
    : undefined;
  const formTargets = redirectTargets.filter((u): u is string => !!u);
  return sendLayoutPage(reply, { status, title, body, notice, formTargets });
}

const notFound = (reply: FastifyReply, what = 'This link') =>
  sendPage(reply, 404, 'Not found', html`<p>${what} does not exist or has expired. Start again from the app.</p>`);

type Item = { price: { nickname?: string | null; id: string; unit_amount?: number | null }; quantity?: number | null };

function itemRows(items: Item[]): Html {
  return html`<table><thead><tr><th>Plan</th><th>Quantity</th><th>Price</th></tr></thead><tbody>${items.map(
    (item) => html`
<tr><td>${item.price.nickname ?? item.price.id}</td><td>${item.quantity ?? 1}</td><td>${money(item.price.unit_amount)} / month</td></tr>`,
  )}</tbody></table>`;
}

function subscriptionSection(portalId: string, sub: Stripe.Subscription): Html {
  const items = sub.items.data as unknown as Item[];
  const periodEnd = sub.items.data[0]?.current_period_end;
  const ended = ENDED.includes(sub.status);
  const when = ended
    ? html`Ended ${day(sub.ended_at)}.`
    : sub.cancel_at_period_end
      ? html`Cancels at the end of the period, ${day(periodEnd)}.`
      : html`Renews ${day(periodEnd)}.`;
  return html`<section><h2>Subscription ${sub.id} <span class="muted">(${sub.status})</span></h2>
${itemRows(items)}<p>${when}</p>
${ended ? '' : html`<form method="post" action="/billing/sandbox/portal/${portalId}/subscriptions/${sub.id}/cancel"><button type="submit">Cancel subscription</button></form>`}</section>`;
}

const billingSandboxPages: FastifyPluginAsyncZod = async (app) => {
  const sandbox = app.billing.sandbox;
  // Errors as pages: a malformed id is simply a link that does not exist.
  app.setErrorHandler((error: FastifyError, request, reply) => {
    if (error.validation) return notFound(reply);
    const failure = pageFailure(error, request, reply, 'billing sandbox page');
    return sendPage(reply, failure.status, failure.title, html`<p>${failure.text}</p>`, [], sandbox !== null);
  });

  // Where the default success, cancel and portal-return URLs lead: needed
  // with real Stripe too (BILLING_*_URL unset), so it is served in every mode.
  app.get('/billing/return', { schema: { hide: true, querystring: ReturnQuery } }, async (request, reply) => {
    const { checkout, portal } = request.query;
    const title =
      checkout === 'success'
        ? 'Checkout complete'
        : checkout === 'cancelled'
          ? 'Checkout cancelled'
          : portal === 'done'
            ? 'Back from the billing portal'
            : 'Billing';
    const detail =
      checkout === 'success'
        ? 'The plan changes as soon as the payment event has been applied, usually within seconds.'
        : checkout === 'cancelled'
          ? 'Nothing was charged and the plan is unchanged.'
          : '';
    return sendPage(
      reply,
      200,
      title,
      html`${detail ? html`<p>${detail}</p>` : ''}<p>You may close this window.</p>`,
      [],
      sandbox !== null,
    );
  });

  if (!sandbox) return;
  if (!app.hasContentTypeParser('application/x-www-form-urlencoded')) await app.register(formbody, { bodyLimit: 4096 });

  const checkoutPath = (id: string) => `/billing/sandbox/checkout/${id}`;
  const portalPath = (id: string) => `/billing/sandbox/portal/${id}`;

  app.get(
    '/billing/sandbox/checkout/:id',
    { schema: { hide: true, params: SessionParams } },
    async (request, reply) => {
      const session = await sandbox.checkoutSession(request.params.id);
      if (!session || session.status === 'expired') return notFound(reply, 'This checkout');
      const items = (session.line_items?.data ?? []) as unknown as Item[];
      if (session.status === 'complete') {
        return sendPage(
          reply,
          200,
          'Already paid',
          html`<p>This checkout is complete.</p>${itemRows(items)}
<p><a href="${session.success_url ?? '/'}">Back to the app</a></p>`,
        );
      }
      return sendPage(
        reply,
        200,
        'Checkout',
        html`
<p>Subscribe with a simulated card payment. "Pay" succeeds at once; the app then receives the same events as from Stripe.</p>
${itemRows(items)}
<p><strong>Total: ${money(session.amount_total)} per month</strong></p>
<form method="post" action="${checkoutPath(session.id)}/pay"><button type="submit">Pay ${money(session.amount_total)}</button></form>
<form method="post" action="${checkoutPath(session.id)}/cancel"><button type="submit">Cancel</button></form>`,
        [session.success_url, session.cancel_url],
      );
    },
  );

  app.post(
    '/billing/sandbox/checkout/:id/pay',
    { schema: { hide: true, params: SessionParams } },
    async (request, reply) => {
      const done = await sandbox.completeCheckout(request.params.id);
      if (!done) return notFound(reply, 'This checkout');
      request.log.info({ sessionId: request.params.id }, 'billing sandbox: checkout paid');
      return reply.code(303).header('location', done.redirect).send();
    },
  );

  app.post(
    '/billing/sandbox/checkout/:id/cancel',
    { schema: { hide: true, params: SessionParams } },
    async (request, reply) => {
      const back = await sandbox.cancelCheckout(request.params.id);
      if (!back) return notFound(reply, 'This checkout');
      return reply.code(303).header('location', back.redirect).send();
    },
  );

  app.get('/billing/sandbox/portal/:id', { schema: { hide: true, params: SessionParams } }, async (request, reply) => {
    const portal = await sandbox.portalSession(request.params.id);
    if (!portal) return notFound(reply, 'This billing portal link');
    const subs = await sandbox.subscriptionsOf(portal.customer);
    return sendPage(
      reply,
      200,
      'Billing portal',
      html`
<p class="muted">Customer ${portal.customer}</p>
${subs.length > 0 ? subs.map((sub) => subscriptionSection(portal.id, sub)) : html`<p>No subscriptions.</p>`}
${portal.return_url ? html`<p><a href="${portal.return_url}">Return to the app</a></p>` : ''}`,
    );
  });

  app.post(
    '/billing/sandbox/portal/:id/subscriptions/:subId/cancel',
    { schema: { hide: true, params: CancelParams } },
    async (request, reply) => {
      const { id, subId } = request.params;
      const portal = await sandbox.portalSession(id);
      if (!portal) return notFound(reply, 'This billing portal link');
      // Only the portal customer's own subscriptions.
      const owned = (await sandbox.subscriptionsOf(portal.customer)).some((sub) => sub.id === subId);
      if (!owned || !(await sandbox.cancelSubscription(subId))) return notFound(reply, 'This subscription');
      request.log.info({ subscriptionId: subId }, 'billing sandbox: subscription canceled in the portal');
      return reply.code(303).header('location', portalPath(id)).send();
    },
  );
};

export default billingSandboxPages;
