// The page behind an agent's approve_url ({base_url}/boards/approvals/:id):
// a person signs in with e-mail and password, sees what would be published
// (board, version, visibility, a preview of the content, which agent asked
// and when) and approves or denies. Plain HTML forms, no script; the session
// and CSRF handling are the claim page's (api/pages/session.ts). Only an
// Admin of the approval's workspace sees or decides anything: a signed-in
// non-member gets the same 404 as an unknown id, a Viewer a 403. The JSON
// routes (/api/boards/approvals/...) stay for API clients.
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { findUser, type UserRow } from '../../../core/accounts/users.ts';
import {
  approvalForPage,
  decideApprovalAsAdmin,
  memberRole,
  type ApprovalDetail,
} from '../../../core/boards/approvals.ts';
import { boardContent } from '../../../core/boards/boards.ts';
import { html, sendPage, type Html } from '../../pages/layout.ts';
import { renderReport } from '../../pages/report.ts';
import { pageSessions, seeOther, setUpFormPages, passwordSignIn, type PageSession } from '../../pages/session.ts';

export const APPROVAL_PAGE_PREFIX = '/boards/approvals';
export const approvalPageUrl = (baseUrl: string, approvalId: string) =>
  `${baseUrl}${APPROVAL_PAGE_PREFIX}/${approvalId}`;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const Params = z.object({ approvalId: z.string().max(64) });
// Everything optional and checked by hand, so a bad form gets a page, not JSON.
const Form = z.object({
  action: z.string().max(32).optional(),
  csrf: z.string().max(128).optional(),
  email: z.string().max(320).optional(),
  password: z.string().max(1024).optional(),
});
type Form = z.infer<typeof Form>;

const when = (ts: string | null) => (ts ? `${new Date(ts).toISOString().slice(0, 16).replace('T', ' ')} UTC` : '—');

function stateText(a: ApprovalDetail): Html {
  const by = `${a.decided_by_email ?? 'a former member'} on ${when(a.decided_at)}`;
  switch (a.state) {
    case 'pending':
      return html`<span class="notice">Waiting for an Admin's decision.</span>`;
    case 'approved':
      return html`<span class="ok">Approved</span> by ${by}. The agent publishes it when it sends the same request again.`;
    case 'consumed':
      return html`<span class="ok">Approved</span> by ${by}, and published.`;
    case 'denied':
      return html`<span class="bad">Denied</span> by ${by}. The agent cannot publish this request.`;
  }
}

const approvalPageRoutes: FastifyPluginAsyncZod = async (app) => {
  const { config } = app;
  const sessions = pageSessions({
    purpose: 'board-approval-page',
    cookie: 'approval_session',
    path: APPROVAL_PAGE_PREFIX,
    secure: config.baseUrl.startsWith('https:'),
    secret: config.secrets.PLATFORM_JWT_SECRET,
    db: app.db,
  });
  const pathOf = (id: string) => `${APPROVAL_PAGE_PREFIX}/${id}`;

  const page = (reply: FastifyReply, status: number, title: string, body: Html) =>
    sendPage(reply, { status, title, body });
  const message = (reply: FastifyReply, status: number, title: string, text: string) =>
    page(reply, status, title, html`<p>${text}</p>`);
  const signOut = (id: string, s: PageSession, user: UserRow) => html`<form method="post" action="${pathOf(id)}">
<input type="hidden" name="csrf" value="${sessions.csrf(id, s)}"><p class="muted">Signed in as ${user.email}.
<button type="submit" name="action" value="signout">Sign out</button></p></form>`;

  /** The same page for an unknown id and for a request of a workspace the person is not in. */
  const notFound = (reply: FastifyReply, extra: Html | '' = '') =>
    page(
      reply,
      404,
      'Publish request not found',
      html`<p>There is no such publish request. Check the link the agent gave you.</p>${extra}`,
    );

  function signInPage(reply: FastifyReply, status: number, id: string, s: PageSession, error?: string) {
    return page(
      reply,
      status,
      'Sign in to review a publish request',
      html`
<p>An agent asks to publish an insight board. Sign in as an Admin of its workspace to see the board and decide.</p>
${error ? html`<p class="error">${error}</p>` : ''}
<form method="post" action="${pathOf(id)}">
<input type="hidden" name="csrf" value="${sessions.csrf(id, s)}"><input type="hidden" name="action" value="signin">
<label>E-mail <input type="email" name="email" required autocomplete="username"></label>
<label>Password <input type="password" name="password" required autocomplete="current-password"></label>
<button type="submit">Sign in</button>
</form>`,
    );
  }

  async function decisionPage(
    reply: FastifyReply,
    status: number,
    a: ApprovalDetail,
    s: PageSession,
    user: UserRow,
    error?: string,
  ) {
    const content = await boardContent(app.db, a.board_id, a.version);
    const pending = a.state === 'pending';
    return page(
      reply,
      status,
      pending ? 'Publish this board?' : 'Publish request',
      html`
${error ? html`<p class="error">${error}</p>` : ''}
${pending ? html`<p>An agent asks to publish this board ${a.visibility === 'public' ? 'publicly: anyone with the link will be able to read it' : 'privately'}. Approve only this exact request if the content below may be shown.</p>` : ''}
<dl><dt>Board</dt><dd>${a.board_title}</dd>
<dt>Version</dt><dd>${a.version}</dd>
<dt>Visibility</dt><dd>${a.visibility === 'public' ? 'public (anyone with the link)' : 'private'}</dd>
<dt>Workspace</dt><dd>${a.tenant_name}</dd>
<dt>Asked by</dt><dd>${a.requested_by_name ? html`agent ${a.requested_by_name} (<code>${a.requested_by_principal}</code>)` : 'an agent that no longer exists'}</dd>
<dt>Asked at</dt><dd>${when(a.created_at)}</dd>
<dt>State</dt><dd>${stateText(a)}</dd></dl>
${
  pending
    ? html`<form method="post" action="${pathOf(a.id)}">
<input type="hidden" name="csrf" value="${sessions.csrf(a.id, s)}">
<button type="submit" name="action" value="approve">Approve</button>
<button type="submit" name="action" value="deny">Deny</button>
</form>`
    : ''
}
<h2>Preview of version ${a.version}</h2>
<div class="preview">${content === null ? html`<p class="muted">(no content)</p>` : renderReport(content, 0, 'h4')}</div>
${signOut(a.id, s, user)}`,
    );
  }

  const forbidden = (reply: FastifyReply, id: string, s: PageSession, user: UserRow) =>
    page(
      reply,
      403,
      'An Admin must decide',
      html`<p>You are a Viewer in this workspace. Only an Admin of the workspace can see and decide this publish request; ask one to open this link.</p>
${signOut(id, s, user)}`,
    );

  /** The approval this person may see: the page to send instead when there is none. */
  async function visible(
    reply: FastifyReply,
    id: string,
    s: PageSession,
    user: UserRow,
  ): Promise<{ approval: ApprovalDetail } | { refused: FastifyReply }> {
    const approval = await approvalForPage(app.db, id);
    const role = approval ? await memberRole(app.db, approval.tenant_id, user.id) : null;
    if (!approval || !role) return { refused: notFound(reply, signOut(id, s, user)) };
    if (role !== 'admin') return { refused: forbidden(reply, id, s, user) };
    return { approval };
  }

  async function signedInUser(s: PageSession): Promise<UserRow | null> {
    return s.userId ? findUser(app.db, s.userId) : null;
  }

  // ------------------------------------------------------------ routes

  await setUpFormPages(app, message, 'approval page');

  app.get(`${APPROVAL_PAGE_PREFIX}/:approvalId`, { schema: { hide: true, params: Params } }, async (request, reply) => {
    const id = request.params.approvalId;
    if (!UUID.test(id)) return notFound(reply);
    const session = (await sessions.read(request)) ?? (await sessions.start(reply, null));
    const user = await signedInUser(session);
    if (!user) return signInPage(reply, 200, id, session.userId ? await sessions.start(reply, null) : session);
    const seen = await visible(reply, id, session, user);
    return 'refused' in seen ? seen.refused : decisionPage(reply, 200, seen.approval, session, user);
  });

  app.post(
    `${APPROVAL_PAGE_PREFIX}/:approvalId`,
    { schema: { hide: true, params: Params, body: Form.optional() } },
    async (request, reply) => {
      const form: Form = request.body ?? {};
      const id = request.params.approvalId;
      if (!UUID.test(id)) return notFound(reply);
      const session = await sessions.read(request);
      if (!sessions.checkCsrf(id, session, form.csrf)) {
        return page(
          reply,
          403,
          'Form expired',
          html`<p>This form has expired or did not come from this page.</p><p><a href="${pathOf(id)}">Open the request again</a></p>`,
        );
      }
      if (form.action === 'signin') return signIn(request, reply, id, session, form);
      if (form.action === 'signout') {
        await sessions.end(session);
        await sessions.start(reply, null);
        return seeOther(reply, pathOf(id));
      }
      if (form.action !== 'approve' && form.action !== 'deny')
        return message(reply, 400, 'Unknown action', 'Choose Approve or Deny.');
      const user = await signedInUser(session);
      if (!user) return signInPage(reply, 401, id, session, 'Sign in first.');
      const outcome = await decideApprovalAsAdmin(
        app.db,
        id,
        user.id,
        form.action === 'approve' ? 'approved' : 'denied',
      );
      if (outcome.kind === 'not_found') return notFound(reply, signOut(id, session, user));
      if (outcome.kind === 'forbidden') return forbidden(reply, id, session, user);
      if (outcome.kind === 'already_decided') {
        const seen = await visible(reply, id, session, user);
        if ('refused' in seen) return seen.refused;
        return decisionPage(
          reply,
          409,
          seen.approval,
          session,
          user,
          `This request was already decided (${seen.approval.state}).`,
        );
      }
      request.log.info(
        { approvalId: id, userId: user.id, state: outcome.approval.state },
        'board publish approval decided on the page',
      );
      return seeOther(reply, pathOf(id));
    },
  );

  async function signIn(
    request: FastifyRequest,
    reply: FastifyReply,
    id: string,
    s: PageSession,
    form: Form,
  ): Promise<FastifyReply> {
    if (!form.email || !form.password) return signInPage(reply, 400, id, s, 'Enter your e-mail and password.');
    const signedIn = await passwordSignIn(app, request, reply, form.email.trim(), form.password);
    if ('locked' in signedIn) return message(reply, 429, 'Too many sign-in attempts', signedIn.locked);
    if ('wrong' in signedIn) return signInPage(reply, 401, id, s, 'E-mail or password is wrong.');
    const { user } = signedIn;
    await sessions.start(reply, user.id);
    request.log.info({ approvalId: id, userId: user.id }, 'signed in on the approval page');
    return seeOther(reply, pathOf(id));
  }
};

export default approvalPageRoutes;
