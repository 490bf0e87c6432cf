// The invitation accept page's HTML: the open form and its script (INVITE_SCRIPT, served as
// /invitations/accept.js), and the join, sign-in, new-account, joined and refusal pages.
import type { FastifyReply } from 'fastify';
import { sameEmail } from '../../../core/accounts/email.ts';
import type { UserRow } from '../../../core/accounts/users.ts';
import { PASSWORD_MAX_LENGTH, PASSWORD_MIN_LENGTH } from '../../../core/crypto/passwords.ts';
import { notOpen, type InvitationView } from '../../../core/teams/invitation-acceptance.ts';
import { ROLE_TITLES } from '../../../core/tenants/roles.ts';
import { html, sendPage, type Html } from '../../pages/layout.ts';

export const ACCEPT_PAGE = '/invitations/accept';
export const PREFIX = '/invitations';

/** The CSRF token of a form acting on `subject`, in the person's page session. */
export type Csrf = (subject: string) => string;

// Also on a hash change: a link opened in a tab already on this page only
// changes the fragment, and loads nothing.
export const INVITE_SCRIPT = `'use strict';
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

const HEADERS = { 'x-robots-tag': 'noindex' };
const when = (ts: string) => `${new Date(ts).toISOString().slice(0, 16).replace('T', ' ')} UTC`;

// A page shown with a session carries the open form and its script, so a
// link opened while the cookie still holds an earlier invitation (used,
// revoked, someone else's) opens the new one instead of showing the old.
export const page = (reply: FastifyReply, status: number, title: string, body: Html, csrf?: Csrf) =>
  sendPage(reply, {
    status,
    title,
    body: csrf ? html`${body}${openForm(csrf, false)}` : body,
    headers: HEADERS,
    ...(csrf ? { script: `${PREFIX}/accept.js` } : {}),
  });
export const message = (reply: FastifyReply, status: number, title: string, text: string) =>
  page(reply, status, title, html`<p>${text}</p>`);

/** The form the script posts a link's token with; shown where the person may paste it, else hidden fields only. */
const openForm = (csrf: Csrf, shown: boolean) => html`
<form id="open-form" method="post" action="${ACCEPT_PAGE}">
<input type="hidden" name="csrf" value="${csrf('open')}"><input type="hidden" name="action" value="open">
${
  shown
    ? html`<label>Invitation code (the part of the link after <code>#</code>) <input type="text" name="token" required autocomplete="off" class="reason"></label>
<button type="submit">Continue</button>`
    : html`<input type="hidden" name="token">`
}
</form>`;

export const openPage = (reply: FastifyReply, status: number, csrf: Csrf, error?: string) =>
  sendPage(reply, {
    status,
    title: 'Accept an invitation',
    body: html`
${error ? html`<p class="error">${error}</p>` : html`<p>Opening your invitation…</p>`}${openForm(csrf, true)}`,
    headers: HEADERS,
    script: `${PREFIX}/accept.js`,
  });

const summary = (
  v: InvitationView,
) => html`<p>${v.invited_by ?? 'An Admin'} invited <strong>${v.email}</strong> to join the workspace <strong>${v.tenant_name}</strong> as ${ROLE_TITLES[v.role]}.</p>
<p class="muted">The invitation expires ${when(v.expires_at)}.</p>`;

const signOutForm = (csrf: Csrf, user: UserRow) => html`<form method="post" action="${ACCEPT_PAGE}">
<input type="hidden" name="csrf" value="${csrf('signout')}"><p class="muted">Signed in as ${user.email}.
<button type="submit" name="action" value="signout">Sign out</button></p></form>`;

const joinedPage = (reply: FastifyReply, v: InvitationView, csrf: Csrf) =>
  page(
    reply,
    200,
    `You joined ${v.tenant_name}`,
    html`<p class="ok">You are now ${v.role === 'admin' ? 'an' : 'a'} ${ROLE_TITLES[v.role]} of ${v.tenant_name}.</p>
<p>Sign in to the API with your e-mail and password (<code>POST /api/auth/login</code>) and send the workspace's id as the <code>x-tenant-id</code> header:</p>
<pre>${v.tenant_id}</pre>
<p>It is also listed by <code>GET /api/tenants/</code>, with every other workspace you belong to. <a href="/docs">API reference</a></p>`,
    csrf,
  );

/** What the person sees for the invitation in the cookie, given who is signed in. */
export async function invitationPage(
  reply: FastifyReply,
  status: number,
  v: InvitationView,
  csrf: Csrf,
  user: UserRow | null,
  error?: string,
): Promise<FastifyReply> {
  if (v.state === 'accepted' && user && v.accepted_by === user.id) return joinedPage(reply, v, csrf);
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
      csrf,
    );
  }
  const problem = error ? html`<p class="error">${error}</p>` : '';
  if (user) {
    if (!sameEmail(user.email, v.email)) {
      return page(
        reply,
        403,
        'This invitation is for someone else',
        html`<p>This invitation is for <strong>${v.email}</strong>, and you are signed in as ${user.email}.
Sign out and sign in with the invited address, or ask an Admin of ${v.tenant_name} to invite ${user.email}.</p>${signOutForm(csrf, user)}`,
        csrf,
      );
    }
    return page(
      reply,
      status,
      `Join ${v.tenant_name}`,
      html`${summary(v)}${problem}
<form method="post" action="${ACCEPT_PAGE}"><input type="hidden" name="csrf" value="${csrf(`accept:${v.id}`)}">
<button type="submit" name="action" value="accept">Join ${v.tenant_name}</button></form>${signOutForm(csrf, user)}`,
      csrf,
    );
  }
  if (v.has_account) {
    return page(
      reply,
      status,
      `Sign in to join ${v.tenant_name}`,
      html`${summary(v)}${problem}
<p>An account for ${v.email} exists: sign in to accept.</p>
<form method="post" action="${ACCEPT_PAGE}"><input type="hidden" name="csrf" value="${csrf('signin')}"><input type="hidden" name="action" value="signin">
<label>E-mail <input type="email" name="email" value="${v.email}" readonly autocomplete="username"></label>
<label>Password <input type="password" name="password" required autocomplete="current-password"></label>
<button type="submit">Sign in</button></form>`,
      csrf,
    );
  }
  return page(
    reply,
    status,
    `Join ${v.tenant_name}`,
    html`${summary(v)}${problem}
<p>Create your account for ${v.email} to accept:</p>
<form method="post" action="${ACCEPT_PAGE}"><input type="hidden" name="csrf" value="${csrf(`create:${v.id}`)}"><input type="hidden" name="action" value="create">
<label>E-mail <input type="email" name="email" value="${v.email}" readonly autocomplete="username"></label>
<label>Your name <input type="text" name="name" required maxlength="200" autocomplete="name" class="reason"></label>
<label>Password (at least ${PASSWORD_MIN_LENGTH} characters) <input type="password" name="password" required minlength="${PASSWORD_MIN_LENGTH}" maxlength="${PASSWORD_MAX_LENGTH}" autocomplete="new-password"></label>
<label>Password again <input type="password" name="confirm" required autocomplete="new-password"></label>
<button type="submit">Create account and join</button></form>`,
    csrf,
  );
}

export const linkGone = (reply: FastifyReply, csrf: Csrf) =>
  openPage(
    reply,
    404,
    csrf,
    'This invitation link does not work: check that the whole link was copied, or ask for a new invitation.',
  );
