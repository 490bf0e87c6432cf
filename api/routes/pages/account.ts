// GET/POST /account: where a person signs in from the landing page. Plain
// HTML forms, no script: e-mail and password under the login budget of
// POST /api/auth/login, a page session (api/pages/session.ts) on /account
// only, CSRF tokens in every form. Signed in, the person sees their account:
// the workspaces they belong to with their role and plan, and, for an
// operator, the way to the console. The platform's work itself happens in
// apps and agents over the API; this page is the person's way in and check.
import type { FastifyReply } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { findUser, type UserRow } from '../../../core/accounts/users.ts';
import { listTenantsOfMember } from '../../../core/tenants/tenants.ts';
import { html, sendPage } from '../../pages/layout.ts';
import { pageSessions, passwordSignIn, seeOther, setUpFormPages, type PageSession } from '../../pages/session.ts';

export const ACCOUNT_PAGE = '/account';
const CSRF_SUBJECT = 'account';
/** How many workspaces the page lists (a person in more reads the rest through the API). */
const WORKSPACES_SHOWN = 50;

// Everything optional and checked by hand, so a bad form gets a page, not JSON.
const Form = z.object({
  csrf: z.string().max(128).optional(),
  email: z.string().max(320).optional(),
  password: z.string().max(1024).optional(),
});
type Form = z.infer<typeof Form>;

const accountRoutes: FastifyPluginAsyncZod = async (app) => {
  const sessions = pageSessions({
    db: app.db,
    purpose: 'account',
    cookie: 'account_session',
    path: ACCOUNT_PAGE,
    secure: app.config.baseUrl.startsWith('https:'),
    secret: app.config.secrets.PLATFORM_JWT_SECRET,
  });
  const message = (reply: FastifyReply, status: number, title: string, text: string) =>
    sendPage(reply, {
      status,
      title,
      body: html`<p>${text}</p><p><a href="${ACCOUNT_PAGE}">Sign in again</a></p>`,
    });
  await setUpFormPages(app, message, 'account page');

  function signInPage(reply: FastifyReply, status: number, s: PageSession, error?: string) {
    return sendPage(reply, {
      status,
      title: 'Sign in',
      body: html`<p>Sign in with the e-mail and password of your account on this platform.</p>
${error ? html`<p class="error">${error}</p>` : ''}
<form method="post" action="${ACCOUNT_PAGE}/sign-in"><input type="hidden" name="csrf" value="${sessions.csrf(CSRF_SUBJECT, s)}">
<label>E-mail <input type="email" name="email" required autocomplete="username"></label>
<label>Password <input type="password" name="password" required autocomplete="current-password"></label>
<button type="submit">Sign in</button></form>
<p class="muted small">No account yet? An invitation to a workspace, or an agent's claim link, lets you make one. Operators sign in at the <a href="/console">operator console</a>.</p>`,
    });
  }

  async function accountPage(reply: FastifyReply, s: PageSession, user: UserRow) {
    const rows = await listTenantsOfMember(app.db, user.id, { limit: WORKSPACES_SHOWN, after: null });
    const shown = rows.slice(0, WORKSPACES_SHOWN);
    const workspaces =
      shown.length === 0
        ? html`<p class="muted" id="no-workspaces">You are in no workspace yet. An invitation from a workspace's Admin, or claiming an agent, adds you to one.</p>`
        : html`<table id="workspaces"><thead><tr><th>Workspace</th><th>Your role</th><th>Plan</th></tr></thead><tbody>
${shown.map((w) => html`<tr><td>${w.name}</td><td>${w.role}${w.owned ? ' (owner)' : ''}</td><td>${w.plan}</td></tr>`)}
</tbody></table>${rows.length > WORKSPACES_SHOWN ? html`<p class="muted small">And more: the API lists them all (<code>GET /api/tenants/</code>).</p>` : ''}`;
    return sendPage(reply, {
      title: 'Your account',
      body: html`<p>Signed in as <strong>${user.email}</strong>${user.display_name ? html` (${user.display_name})` : ''}.</p>
${user.is_operator ? html`<p>You are an operator: <a href="/console">open the operator console</a>.</p>` : ''}
<h2>Your workspaces</h2>${workspaces}
<p class="muted small">Agents and apps do the work over the API (see the <a href="/docs">API reference</a>).</p>
<form method="post" action="${ACCOUNT_PAGE}/sign-out"><input type="hidden" name="csrf" value="${sessions.csrf(CSRF_SUBJECT, s)}"><button type="submit">Sign out</button></form>`,
    });
  }

  app.get(ACCOUNT_PAGE, { schema: { hide: true } }, async (request, reply) => {
    const session = await sessions.read(request);
    const user = session?.userId ? await findUser(app.db, session.userId) : null;
    if (session && user) return accountPage(reply, session, user);
    return signInPage(reply, 200, session ?? (await sessions.start(reply, null)));
  });

  app.post(`${ACCOUNT_PAGE}/sign-in`, { schema: { hide: true, body: Form.optional() } }, async (request, reply) => {
    const form: Form = request.body ?? {};
    const session = await sessions.read(request);
    if (!sessions.checkCsrf(CSRF_SUBJECT, session, form.csrf))
      return message(reply, 403, 'Form expired', 'This form has expired or did not come from this page.');
    if (!form.email || !form.password) return signInPage(reply, 400, session, 'Enter your e-mail and password.');
    const signedIn = await passwordSignIn(app, request, reply, form.email.trim(), form.password);
    if ('locked' in signedIn) return message(reply, 429, 'Too many sign-in attempts', signedIn.locked);
    if ('wrong' in signedIn) return signInPage(reply, 401, session, 'E-mail or password is wrong.');
    await sessions.start(reply, signedIn.user.id); // a new session id at sign-in
    return seeOther(reply, ACCOUNT_PAGE);
  });

  app.post(`${ACCOUNT_PAGE}/sign-out`, { schema: { hide: true, body: Form.optional() } }, async (request, reply) => {
    const session = await sessions.read(request);
    if (!sessions.checkCsrf(CSRF_SUBJECT, session, request.body?.csrf))
      return message(reply, 403, 'Form expired', 'This form has expired or did not come from this page.');
    await sessions.end(session); // the cookie, wherever it was copied, signs nobody in
    await sessions.start(reply, null);
    return seeOther(reply, ACCOUNT_PAGE);
  });
};

export default accountRoutes;
