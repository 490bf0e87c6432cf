// GET/POST /console...: the platform operator's console. Server-rendered
// pages in the shared layout (api/pages/layout.ts), live through
// /console/live (./live.ts), actions as plain forms with CSRF tokens, each
// recorded in the audit list with who, when and why (core/console/actions.ts).
// A person who is not an operator gets 403 and sees nothing of the platform.
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { UserRow } from '../../../core/accounts/users.ts';
import { cancelJob, retryJob, setTenantSuspended, type ActionOutcome } from '../../../core/console/actions.ts';
import { BULK_ACTIONS, runBulk, type BulkAction } from '../../../core/console/bulk.ts';
import { html, sendPage, type Html } from '../../pages/layout.ts';
import { seeOther, setUpFormPages, passwordSignIn, type PageSession } from '../../pages/session.ts';
import { UUID, withQuery } from './format.ts';
import { jobFilters } from './views/jobs.ts';
import { CONSOLE_SCRIPT } from './script.ts';
import { consoleSessions, consoleVisitor, CONSOLE_PREFIX, CSRF_SUBJECT } from './session.ts';
import { CONSOLE_PAGES, type ConsolePage } from './views/index.ts';
import type { View } from './views/view.ts';

const Query = z.record(z.string().max(50), z.string().max(1000));
const Form = z.object({
  csrf: z.string().max(128).optional(),
  email: z.string().max(320).optional(),
  password: z.string().max(1024).optional(),
  next: z.string().max(1000).optional(),
  reason: z.string().max(2000).optional(),
  // A bulk action's filter, as the list's query string has it.
  action: z.string().max(20).optional(),
  state: z.string().max(20).optional(),
  kind: z.string().max(200).optional(),
  tenant: z.string().max(64).optional(),
  account: z.string().max(64).optional(),
  from: z.string().max(40).optional(),
  to: z.string().max(40).optional(),
});
type Form = z.infer<typeof Form>;

/** Only a console path may be where sign-in leads (no open redirect). */
const safeNext = (next: string | undefined) =>
  next && /^\/console(\/[A-Za-z0-9/_.-]*)?(\?[^\s#]*)?$/.test(next) ? next : CONSOLE_PREFIX;

const consoleRoutes: FastifyPluginAsyncZod = async (app) => {
  const sessions = consoleSessions(app.config, app.db);

  const message = (reply: FastifyReply, status: number, title: string, text: string, extra: Html | '' = '') =>
    sendPage(reply, { status, title, body: html`<p>${text}</p>${extra}` });
  await setUpFormPages(app, message, 'console');
  // The console's forms post form fields, nothing else (a JSON body is no form of ours).
  app.addHook('preValidation', async (request, reply) => {
    if (request.method !== 'POST') return;
    if (!/^application\/x-www-form-urlencoded\b/i.test(request.headers['content-type'] ?? '')) {
      return message(reply, 415, 'Not a form', 'The console takes its own forms only.');
    }
  });

  const signOutForm = (s: PageSession, user: UserRow) => html`<form method="post" action="/console/sign-out">
<input type="hidden" name="csrf" value="${sessions.csrf(CSRF_SUBJECT, s)}"><p class="muted small">Signed in as ${user.email}.
<button type="submit">Sign out</button></p></form>`;

  function signInPage(reply: FastifyReply, status: number, s: PageSession, next: string, error?: string) {
    return sendPage(reply, {
      status,
      title: 'Operator console: sign in',
      body: html`
<p>The console shows the platform's queues, jobs, workers and tenants to its operators. Sign in with your platform account.</p>
${error ? html`<p class="error">${error}</p>` : ''}
<form method="post" action="/console/sign-in">
<input type="hidden" name="csrf" value="${sessions.csrf(CSRF_SUBJECT, s)}"><input type="hidden" name="next" value="${next}">
<label>E-mail <input type="email" name="email" required autocomplete="username"></label>
<label>Password <input type="password" name="password" required autocomplete="current-password"></label>
<button type="submit">Sign in</button></form>`,
    });
  }

  const refused = (reply: FastifyReply, s: PageSession, user: UserRow) =>
    sendPage(reply, {
      status: 403,
      title: 'Not an operator',
      body: html`<p>Only the platform operator may use the console. Your account is not one.</p>${signOutForm(s, user)}`,
    });

  function shell(reply: FastifyReply, current: ConsolePage, view: View, s: PageSession, user: UserRow, status = 200) {
    const nav = html`<nav class="console">${CONSOLE_PAGES.filter((p) => p.nav).map(
      (p) =>
        html`<a href="${p.path}"${p === current || (current.path.startsWith(`${p.path}/`) && p.path !== CONSOLE_PREFIX) ? html` aria-current="page"` : ''}>${p.nav}</a>`,
    )}</nav>`;
    return sendPage(reply, {
      status,
      title: `${view.title} · Console`,
      heading: null,
      wide: true,
      script: '/console/console.js',
      body: html`${nav}<span id="live-status" class="live-status" role="status">not live</span><h1>${view.title}</h1>
${view.top ?? ''}<div id="live">${view.live}</div>${view.bottom ?? ''}${signOutForm(s, user)}`,
    });
  }

  app.get('/console/console.js', { schema: { hide: true } }, async (_request, reply) =>
    reply
      .headers({
        'content-type': 'text/javascript; charset=utf-8',
        'cache-control': 'no-cache',
        'x-content-type-options': 'nosniff',
      })
      .send(CONSOLE_SCRIPT),
  );

  for (const page of CONSOLE_PAGES) {
    const Params = z.object(Object.fromEntries(page.params.map((name) => [name, z.string().max(64)])));
    app.get(page.path, { schema: { hide: true, params: Params, querystring: Query } }, async (request, reply) => {
      const visitor = await consoleVisitor(app.db, sessions, request);
      if (visitor.kind === 'anonymous')
        return signInPage(reply, 200, visitor.session ?? (await sessions.start(reply, null)), safeNext(request.url));
      if (visitor.kind === 'refused') return refused(reply, visitor.session, visitor.user);
      const csrf = sessions.csrf(CSRF_SUBJECT, visitor.session);
      const view = await page.view(
        { db: app.db, config: app.config, csrf },
        { params: request.params as Record<string, string>, query: request.query },
      );
      if (!view)
        return shell(
          reply,
          page,
          {
            title: 'Not found',
            live: html`<p>There is no such ${page.path.includes('tenants') ? 'tenant' : 'job'}. It may have been removed by retention.</p>`,
          },
          visitor.session,
          visitor.user,
          404,
        );
      return shell(reply, page, view, visitor.session, visitor.user);
    });
  }

  app.post('/console/sign-in', { schema: { hide: true, body: Form.optional() } }, async (request, reply) => {
    const form: Form = request.body ?? {};
    const session = await sessions.read(request);
    const next = safeNext(form.next);
    if (!sessions.checkCsrf(CSRF_SUBJECT, session, form.csrf)) return expired(reply);
    if (!form.email || !form.password) return signInPage(reply, 400, session, next, 'Enter your e-mail and password.');
    const signedIn = await passwordSignIn(app, request, reply, form.email.trim(), form.password);
    if ('locked' in signedIn) return message(reply, 429, 'Too many sign-in attempts', signedIn.locked);
    if ('wrong' in signedIn) return signInPage(reply, 401, session, next, 'E-mail or password is wrong.');
    const { user } = signedIn;
    await sessions.start(reply, user.id); // a new session id at sign-in
    request.log.info(
      { userId: user.id, operator: user.is_operator },
      user.is_operator ? 'operator signed in to the console' : 'a non-operator signed in to the console and is refused',
    );
    return seeOther(reply, next);
  });

  app.post('/console/sign-out', { schema: { hide: true, body: Form.optional() } }, async (request, reply) => {
    const session = await sessions.read(request);
    if (!sessions.checkCsrf(CSRF_SUBJECT, session, request.body?.csrf)) return expired(reply);
    await sessions.end(session); // the cookie, wherever it was copied, no longer opens the console
    await sessions.start(reply, null);
    if (session?.userId) request.log.info({ userId: session.userId }, 'signed out of the console');
    return seeOther(reply, CONSOLE_PREFIX);
  });

  const expired = (reply: FastifyReply) =>
    message(
      reply,
      403,
      'Form expired',
      'This form has expired or did not come from the console.',
      html`<p><a href="/console">Open the console again</a></p>`,
    );

  /** An action's route: an operator, a valid CSRF token and a reason, then the action and its audit in one transaction. */
  function action(
    path: string,
    param: 'jobId' | 'tenantId',
    run: (operator: { userId: string; email: string }, id: string, reason: string) => Promise<ActionOutcome>,
  ) {
    app.post(
      path,
      { schema: { hide: true, params: z.object({ [param]: z.string().max(64) }), body: Form.optional() } },
      async (request: FastifyRequest, reply) => {
        const id = (request.params as Record<string, string>)[param]!;
        const back = `${CONSOLE_PREFIX}/${param === 'jobId' ? 'jobs' : 'tenants'}/${id}`;
        const form: Form = (request.body as Form | undefined) ?? {};
        const visitor = await consoleVisitor(app.db, sessions, request);
        if (visitor.kind === 'anonymous')
          return signInPage(reply, 401, visitor.session ?? (await sessions.start(reply, null)), back, 'Sign in first.');
        if (visitor.kind === 'refused') return refused(reply, visitor.session, visitor.user);
        if (!sessions.checkCsrf(CSRF_SUBJECT, visitor.session, form.csrf)) return expired(reply);
        if (!UUID.test(id)) return message(reply, 404, 'Not found', 'There is no such thing to act on.');
        const reason = form.reason?.trim() ?? '';
        if (reason.length === 0 || reason.length > 500) {
          return message(
            reply,
            400,
            'Say why',
            'Every action needs a reason of 1 to 500 characters; it is kept in the audit list.',
            html`<p><a href="${back}">Back</a></p>`,
          );
        }
        const outcome = await run({ userId: visitor.user.id, email: visitor.user.email }, id, reason);
        if (!outcome.ok)
          return message(
            reply,
            outcome.status,
            outcome.status === 404 ? 'Not found' : 'Not possible now',
            outcome.message,
            html`<p><a href="${back}">Back</a></p>`,
          );
        request.log.info(
          { action: path.split('/').at(-1), target: id, operator: visitor.user.id, outcome: outcome.outcome },
          'operator action',
        );
        return seeOther(reply, back);
      },
    );
  }
  // A bulk action: the filter as the preview page showed it; the jobs that match now, at most BULK_LIMIT, all or none.
  app.post('/console/jobs/bulk', { schema: { hide: true, body: Form.optional() } }, async (request, reply) => {
    const form: Form = request.body ?? {};
    const listed = {
      state: form.state,
      kind: form.kind,
      tenant: form.tenant,
      account: form.account,
      from: form.from,
      to: form.to,
    };
    const back = withQuery('/console/jobs/bulk', { action: form.action, ...listed });
    const visitor = await consoleVisitor(app.db, sessions, request);
    if (visitor.kind === 'anonymous')
      return signInPage(reply, 401, visitor.session ?? (await sessions.start(reply, null)), back, 'Sign in first.');
    if (visitor.kind === 'refused') return refused(reply, visitor.session, visitor.user);
    if (!sessions.checkCsrf(CSRF_SUBJECT, visitor.session, form.csrf)) return expired(reply);
    const action = (BULK_ACTIONS as readonly string[]).includes(form.action ?? '') ? (form.action as BulkAction) : null;
    const f = jobFilters(listed);
    if (!action || f.ignored.length > 0)
      return message(
        reply,
        400,
        'Not a bulk action',
        `Choose retry or cancel, with the list's filters${f.ignored.length ? ` (not valid: ${f.ignored.join(', ')})` : ''}.`,
        html`<p><a href="/console/jobs">Back to the list</a></p>`,
      );
    const reason = form.reason?.trim() ?? '';
    if (reason.length === 0 || reason.length > 500) {
      return message(
        reply,
        400,
        'Say why',
        'Every action needs a reason of 1 to 500 characters; it is kept in the audit list.',
        html`<p><a href="${back}">Back</a></p>`,
      );
    }
    const filter = { state: f.state, kind: f.kind, tenantId: f.tenant, accountId: f.account, from: f.from, to: f.to };
    const outcome = await runBulk(
      app.db,
      { userId: visitor.user.id, email: visitor.user.email },
      action,
      filter,
      reason,
    );
    if (!outcome.ok)
      return message(
        reply,
        outcome.status,
        'Too many jobs for one action',
        outcome.message,
        html`<p><a href="${back}">Back</a></p>`,
      );
    request.log.info(
      { action: `bulk ${action}`, operator: visitor.user.id, done: outcome.done, skipped: outcome.skipped },
      'operator action',
    );
    return message(
      reply,
      200,
      'Done',
      `${outcome.outcome}. Each job has its line in the audit list.`,
      html`<p><a href="/console/audit">The audit list</a> · <a href="${withQuery('/console/jobs', listed)}">Back to the list</a></p>`,
    );
  });

  action('/console/jobs/:jobId/retry', 'jobId', (op, id, reason) => retryJob(app.db, op, id, reason));
  action('/console/jobs/:jobId/cancel', 'jobId', (op, id, reason) => cancelJob(app.db, op, id, reason));
  action('/console/tenants/:tenantId/suspend', 'tenantId', (op, id, reason) =>
    setTenantSuspended(app.db, op, id, true, reason),
  );
  action('/console/tenants/:tenantId/resume', 'tenantId', (op, id, reason) =>
    setTenantSuspended(app.db, op, id, false, reason),
  );
};

export default consoleRoutes;
