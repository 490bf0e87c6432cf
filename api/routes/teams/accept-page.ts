// The page an invitation link opens: {base_url}/invitations/accept#<token>.
// The token rides in the fragment, which the browser never sends, so it
// reaches no server log, proxy or Referer. The page's one small script
// (INVITE_SCRIPT) moves it into a form field, clears it from the address bar
// and posts the form; without scripts the person pastes it. The server then
// keeps the token in a short-lived HttpOnly cookie scoped to /invitations
// and shows the invitation: a signed-in person whose e-mail matches joins
// with one button; a person with an account signs in first; a person
// without one sets a name and password (the invitation stands for the
// address) and lands in the workspace; anyone else is refused, and an
// expired, revoked or used invitation says which. Sessions and CSRF tokens
// are the other sign-in pages' (api/pages/session.ts).
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { findUser, type UserRow } from '../../../core/accounts/users.ts';
import { hashPassword, PASSWORD_MAX_LENGTH, PASSWORD_MIN_LENGTH } from '../../../core/crypto/passwords.ts';
import { LIMITS } from '../../../core/rate-limit.ts';
import { inspectInvitation, notOpen, type InvitationView } from '../../../core/teams/invitation-acceptance.ts';
import { ROLE_TITLES } from '../../../core/tenants/roles.ts';
import { PlatformHttpError } from '../../errors.ts';
import { html, sendPage, type Html } from '../../pages/layout.ts';
import { pageSessions, passwordSignIn, seeOther, setUpFormPages, type PageSession } from '../../pages/session.ts';
import { acceptFor } from './accept.ts';

export const ACCEPT_PAGE = '/invitations/accept';
const PREFIX = '/invitations';
const COOKIE = 'invitation_token';
const COOKIE_TTL_S = 30 * 60;

// Also on a hash change: a link opened in a tab already on this page only
// changes the fragment, and loads nothing.
const INVITE_SCRIPT = `'use strict';
(function () {
  function open() {
    var token = location.hash.slice(1);
    var form = document.getElementById('open-form');
    if (!token || !form) return;
    history.replaceState(null, '', location.pathname);
    form.elements.token.value = decodeURIComponent(token);
    form.submit();
  }
  open();
  window.addEventListener('hashchange', open);
})();`;

// Everything optional and checked by hand, so a bad form gets a page, not JSON.
const Form = z.object({
  action: z.string().max(32).optional(),
  csrf: z.string().max(128).optional(),
  token: z.string().max(300).optional(),
  name: z.string().max(300).optional(),
  password: z.string().max(1024).optional(),
  confirm: z.string().max(1024).optional(),
});
type Form = z.infer<typeof Form>;

const HEADERS = { 'x-robots-tag': 'noindex' };
const when = (ts: string) => `${new Date(ts).toISOString().slice(0, 16).replace('T', ' ')} UTC`;

const acceptPageRoutes: FastifyPluginAsyncZod = async (app) => {
  const { config } = app;
  const secure = config.baseUrl.startsWith('https:');
  const sessions = pageSessions({
    purpose: 'invitation-page',
    cookie: 'invitation_session',
    path: PREFIX,
    secure,
    secret: config.secrets.PLATFORM_JWT_SECRET,
    db: app.db,
  });

  // A page shown with a session carries the open form and its script, so a
  // link opened while the cookie still holds an earlier invitation (used,
  // revoked, someone else's) opens the new one instead of showing the old.
  const page = (reply: FastifyReply, status: number, title: string, body: Html, s?: PageSession) =>
    sendPage(reply, {
      status,
      title,
      body: s ? html`${body}${openForm(s, false)}` : body,
      headers: HEADERS,
      ...(s ? { script: `${PREFIX}/accept.js` } : {}),
    });
  const message = (reply: FastifyReply, status: number, title: string, text: string) =>
    page(reply, status, title, html`<p>${text}</p>`);

  const tokenOf = (request: FastifyRequest): string | null => {
    for (const cookie of (request.headers.cookie ?? '').split(';')) {
      const [name, value] = cookie.trim().split('=');
      if (name === COOKIE && value) return decodeURIComponent(value);
    }
    return null;
  };
  const keepToken = (reply: FastifyReply, token: string | null) =>
    reply.header(
      'set-cookie',
      `${COOKIE}=${token ? encodeURIComponent(token) : ''}; Path=${PREFIX}; Max-Age=${token ? COOKIE_TTL_S : 0}; HttpOnly; SameSite=Strict${secure ? '; Secure' : ''}`,
    );

  /** The form the script posts a link's token with; shown where the person may paste it, else hidden fields only. */
  const openForm = (s: PageSession, shown: boolean) => html`
<form id="open-form" method="post" action="${ACCEPT_PAGE}">
<input type="hidden" name="csrf" value="${sessions.csrf('open', s)}"><input type="hidden" name="action" value="open">
${
  shown
    ? html`<label>Invitation code (the part of the link after <code>#</code>) <input type="text" name="token" required autocomplete="off" class="reason"></label>
<button type="submit">Continue</button>`
    : html`<input type="hidden" name="token">`
}
</form>`;

  const openPage = (reply: FastifyReply, status: number, s: PageSession, error?: string) =>
    sendPage(reply, {
      status,
      title: 'Accept an invitation',
      body: html`
${error ? html`<p class="error">${error}</p>` : html`<p>Opening your invitation…</p>`}${openForm(s, true)}`,
      headers: HEADERS,
      script: `${PREFIX}/accept.js`,
    });

  const summary = (
    v: InvitationView,
  ) => html`<p>${v.invited_by ?? 'An Admin'} invited <strong>${v.email}</strong> to join the workspace <strong>${v.tenant_name}</strong> as ${ROLE_TITLES[v.role]}.</p>
<p class="muted">The invitation expires ${when(v.expires_at)}.</p>`;

  const signOutForm = (s: PageSession, user: UserRow) => html`<form method="post" action="${ACCEPT_PAGE}">
<input type="hidden" name="csrf" value="${sessions.csrf('signout', s)}"><p class="muted">Signed in as ${user.email}.
<button type="submit" name="action" value="signout">Sign out</button></p></form>`;

  const joinedPage = (reply: FastifyReply, v: InvitationView, s: PageSession) =>
    page(
      reply,
      200,
      `You joined ${v.tenant_name}`,
      html`<p class="ok">You are now ${v.role === 'admin' ? 'an' : 'a'} ${ROLE_TITLES[v.role]} of ${v.tenant_name}.</p>
<p>Sign in to the API with your e-mail and password (<code>POST /api/auth/login</code>) and send the workspace's id as the <code>x-tenant-id</code> header:</p>
<pre>${v.tenant_id}</pre>
<p>It is also listed by <code>GET /api/tenants/</code>, with every other workspace you belong to. <a href="/docs">API reference</a></p>`,
      s,
    );

  /** What the person sees for the invitation in the cookie, given who is signed in. */
  async function invitationPage(
    reply: FastifyReply,
    status: number,
    v: InvitationView,
    s: PageSession,
    user: UserRow | null,
    error?: string,
  ): Promise<FastifyReply> {
    if (v.state === 'accepted' && user && v.accepted_by === user.id) return joinedPage(reply, v, s);
    const closed = notOpen(v);
    if (closed) {
      const titles = {
        invitation_expired: 'This invitation has expired',
        invitation_revoked: 'This invitation was revoked',
        invitation_used: 'This invitation was already used',
      } as Record<string, string>;
      return page(
        reply,
        410,
        titles[closed.code] ?? 'This invitation does not work',
        html`<p>${closed.message}</p>`,
        s,
      );
    }
    const problem = error ? html`<p class="error">${error}</p>` : '';
    if (user) {
      if (user.email.toLowerCase() !== v.email.toLowerCase()) {
        return page(
          reply,
          403,
          'This invitation is for someone else',
          html`<p>This invitation is for <strong>${v.email}</strong>, and you are signed in as ${user.email}.
Sign out and sign in with the invited address, or ask an Admin of ${v.tenant_name} to invite ${user.email}.</p>${signOutForm(s, user)}`,
          s,
        );
      }
      return page(
        reply,
        status,
        `Join ${v.tenant_name}`,
        html`${summary(v)}${problem}
<form method="post" action="${ACCEPT_PAGE}"><input type="hidden" name="csrf" value="${sessions.csrf(`accept:${v.id}`, s)}">
<button type="submit" name="action" value="accept">Join ${v.tenant_name}</button></form>${signOutForm(s, user)}`,
        s,
      );
    }
    if (v.has_account) {
      return page(
        reply,
        status,
        `Sign in to join ${v.tenant_name}`,
        html`${summary(v)}${problem}
<p>An account for ${v.email} exists: sign in to accept.</p>
<form method="post" action="${ACCEPT_PAGE}"><input type="hidden" name="csrf" value="${sessions.csrf('signin', s)}"><input type="hidden" name="action" value="signin">
<label>E-mail <input type="email" name="email" value="${v.email}" readonly autocomplete="username"></label>
<label>Password <input type="password" name="password" required autocomplete="current-password"></label>
<button type="submit">Sign in</button></form>`,
        s,
      );
    }
    return page(
      reply,
      status,
      `Join ${v.tenant_name}`,
      html`${summary(v)}${problem}
<p>Create your account for ${v.email} to accept:</p>
<form method="post" action="${ACCEPT_PAGE}"><input type="hidden" name="csrf" value="${sessions.csrf(`create:${v.id}`, s)}"><input type="hidden" name="action" value="create">
<label>E-mail <input type="email" name="email" value="${v.email}" readonly autocomplete="username"></label>
<label>Your name <input type="text" name="name" required maxlength="200" autocomplete="name" class="reason"></label>
<label>Password (at least ${PASSWORD_MIN_LENGTH} characters) <input type="password" name="password" required minlength="${PASSWORD_MIN_LENGTH}" maxlength="${PASSWORD_MAX_LENGTH}" autocomplete="new-password"></label>
<label>Password again <input type="password" name="confirm" required autocomplete="new-password"></label>
<button type="submit">Create account and join</button></form>`,
      s,
    );
  }

  const signedIn = async (s: PageSession | null): Promise<UserRow | null> =>
    s?.userId ? findUser(app.db, s.userId) : null;
  const linkGone = (reply: FastifyReply, s: PageSession) =>
    openPage(
      reply,
      404,
      s,
      'This invitation link does not work: check that the whole link was copied, or ask for a new invitation.',
    );

  // ------------------------------------------------------------ routes

  await setUpFormPages(app, message, 'invitation page');

  app.get(`${PREFIX}/accept.js`, { schema: { hide: true } }, async (_request, reply) =>
    reply
      .headers({
        'content-type': 'text/javascript; charset=utf-8',
        'cache-control': 'no-cache',
        'x-content-type-options': 'nosniff',
      })
      .send(INVITE_SCRIPT),
  );

  app.get(ACCEPT_PAGE, { schema: { hide: true } }, async (request, reply) => {
    const session = (await sessions.read(request)) ?? (await sessions.start(reply, null));
    const token = tokenOf(request);
    const view = token ? await inspectInvitation(app.db, token) : null;
    if (!view) return openPage(reply, 200, session);
    return invitationPage(reply, 200, view, session, await signedIn(session));
  });

  app.post(
    ACCEPT_PAGE,
    { onRequest: app.rateLimit(LIMITS.invitationAccept), schema: { hide: true, body: Form.optional() } },
    async (request, reply) => {
      const form: Form = request.body ?? {};
      const session = await sessions.read(request);
      const subjectOf: Record<string, (v: InvitationView | null) => string> = {
        open: () => 'open',
        signin: () => 'signin',
        signout: () => 'signout',
        accept: (v) => `accept:${v?.id}`,
        create: (v) => `create:${v?.id}`,
      };
      const token = form.action === 'open' ? (form.token ?? '').trim() : tokenOf(request);
      const view = token ? await inspectInvitation(app.db, token) : null;
      const subject = subjectOf[form.action ?? '']?.(view);
      if (!subject) return message(reply, 400, 'Unknown action', 'Open the invitation link again.');
      if (!sessions.checkCsrf(subject, session, form.csrf)) {
        return page(
          reply,
          403,
          'Form expired',
          html`<p>This form has expired or did not come from this page. Open the invitation link again.</p>`,
        );
      }
      if (form.action === 'signout') {
        await sessions.end(session);
        await sessions.start(reply, null);
        return seeOther(reply, ACCEPT_PAGE);
      }
      if (!view) {
        keepToken(reply, null);
        return linkGone(reply, session);
      }
      if (form.action === 'open') {
        keepToken(reply, token);
        return seeOther(reply, ACCEPT_PAGE);
      }
      if (form.action === 'signin') return signIn(request, reply, view, session, form);
      const user = await signedIn(session);
      try {
        if (form.action === 'accept') {
          if (!user) return invitationPage(reply, 401, view, session, null, 'Sign in first.');
          await acceptFor(app, request, token!, { userId: user.id });
          return seeOther(reply, ACCEPT_PAGE);
        }
        const name = (form.name ?? '').trim();
        const password = form.password ?? '';
        const wrong =
          !name || name.length > 200
            ? 'Enter your name (at most 200 characters).'
            : password.length < PASSWORD_MIN_LENGTH || password.length > PASSWORD_MAX_LENGTH
              ? `Choose a password of ${PASSWORD_MIN_LENGTH} to ${PASSWORD_MAX_LENGTH} characters.`
              : password !== form.confirm
                ? 'The two passwords differ.'
                : null;
        if (wrong) return invitationPage(reply, 400, view, session, user, wrong);
        const joined = await acceptFor(app, request, token!, {
          newAccount: { displayName: name, passwordHash: await hashPassword(password) },
        });
        await sessions.start(reply, joined.user.id);
        return seeOther(reply, ACCEPT_PAGE);
      } catch (error) {
        if (!(error instanceof PlatformHttpError)) throw error;
        const fresh = (await inspectInvitation(app.db, token!)) ?? view;
        return invitationPage(reply, error.status, fresh, session, user, error.message);
      }
    },
  );

  async function signIn(
    request: FastifyRequest,
    reply: FastifyReply,
    view: InvitationView,
    s: PageSession,
    form: Form & { email?: string },
  ) {
    if (!form.password) return invitationPage(reply, 400, view, s, null, 'Enter your password.');
    const outcome = await passwordSignIn(app, request, reply, view.email, form.password);
    if ('locked' in outcome) return message(reply, 429, 'Too many sign-in attempts', outcome.locked);
    if ('wrong' in outcome) return invitationPage(reply, 401, view, s, null, 'The password is wrong.');
    await sessions.start(reply, outcome.user.id);
    request.log.info({ userId: outcome.user.id, invitationId: view.id }, 'signed in on the invitation page');
    return seeOther(reply, ACCEPT_PAGE);
  }
};

export default acceptPageRoutes;
