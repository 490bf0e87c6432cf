// The claim page a person opens from attempt.verification_uri: sign in with
// their own account, see which agent and workspace are being claimed, then
// confirm (and read the user code for the agent) or deny. Plain HTML forms,
// no script. The session is a short-lived signed cookie scoped to the claim
// pages; every form carries a CSRF token bound to that session and attempt.
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { sameEmail } from '../../../core/accounts/email.ts';
import { findUser, type UserRow } from '../../../core/accounts/users.ts';
import {
  confirmAttempt,
  denyAttempt,
  findAttempt,
  organizationsOf,
  phaseOf,
  selectOrganization,
  type AttemptView,
} from '../../../core/identity/claim-page.ts';
import { ClaimError } from '../../../core/identity/claims.ts';
import { html, sendPage as sendLayoutPage, type Html } from '../../pages/layout.ts';
import { pageSessions, seeOther, setUpFormPages, passwordSignIn, type PageSession } from '../../pages/session.ts';

export const CLAIM_PAGE_PREFIX = '/agent/identity/claim/verify';
const COOKIE = 'claim_session';
const COOKIE_PATH = '/agent/identity/claim';

type Session = PageSession;

const Params = z.object({ attemptId: z.string().max(64) });
// Everything optional and checked by hand, so a bad form gets a page, not JSON.
const Form = z.object({
  action: z.string().max(32).optional(),
  csrf: z.string().max(128).optional(),
  email: z.string().max(320).optional(),
  password: z.string().max(1024).optional(),
  organization_id: z.string().max(64).optional(),
});
type Form = z.infer<typeof Form>;

const CLOSED: Record<string, { status: number; text: string }> = {
  expired: {
    status: 410,
    text: 'This claim link has expired. Ask the agent to start the claim again for a fresh link.',
  },
  denied: { status: 410, text: 'This claim was denied. The agent has to register again.' },
  completed: { status: 410, text: 'This agent has already been claimed.' },
  revoked: { status: 410, text: 'This claim was revoked. The agent has to register again.' },
};

// Served at the identity provider's origin ({auth_url}), which need not
// serve the landing page or /docs: no header or footer links.
const sendPage = (reply: FastifyReply, status: number, title: string, body: Html) =>
  sendLayoutPage(reply, { status, title, body });

const CHOOSE_FIRST =
  'Choose an organization first. The agent will act inside the organization you choose; without a choice it could not complete the claim (organization_selection_required).';

// The agent acts with the person's role there (api/routes/agent/operation.ts): say so before they choose.
const roleNote = (role: string) =>
  role === 'viewer'
    ? 'you are a Viewer there: the agent will only read'
    : role === 'member'
      ? 'you are a Member there'
      : '';

const claimPageRoutes: FastifyPluginAsyncZod = async (app) => {
  const { config } = app;
  const sessions = pageSessions({
    purpose: 'claim-page',
    cookie: COOKIE,
    path: COOKIE_PATH,
    secure: config.authUrl.startsWith('https:'),
    secret: config.secrets.PLATFORM_JWT_SECRET,
    db: app.db,
  });
  const readSession = (request: FastifyRequest) => sessions.read(request);
  const startSession = (reply: FastifyReply, userId: string | null) => sessions.start(reply, userId);

  const csrfFor = (attemptId: string, s: Session) => sessions.csrf(attemptId, s);

  // ------------------------------------------------------------ pages

  const pathOf = (a: AttemptView) => `${CLAIM_PAGE_PREFIX}/${a.id}`;
  const message = (reply: FastifyReply, status: number, title: string, text: string, back?: string) =>
    sendPage(
      reply,
      status,
      title,
      html`<p>${text}</p>${back ? html`<p><a href="${back}">Back to the claim</a></p>` : ''}`,
    );

  function signInPage(reply: FastifyReply, status: number, a: AttemptView, s: Session, error?: string) {
    return sendPage(
      reply,
      status,
      'Sign in to claim an agent',
      html`
<p>An agent asks to be claimed. This claim is for <strong>${a.login_hint}</strong>; sign in as that account.</p>
${error ? html`<p class="error">${error}</p>` : ''}
<form method="post" action="${pathOf(a)}">
<input type="hidden" name="csrf" value="${csrfFor(a.id, s)}"><input type="hidden" name="action" value="signin">
<label>E-mail <input type="email" name="email" required autocomplete="username" value="${a.login_hint}"></label>
<label>Password <input type="password" name="password" required autocomplete="current-password"></label>
<button type="submit">Sign in</button>
</form>`,
    );
  }

  /**
   * The decision: with several organizations the choice comes first (step 1),
   * Confirm second; the user code is handed out only once one is chosen.
   */
  async function decisionPage(
    reply: FastifyReply,
    status: number,
    a: AttemptView,
    s: Session,
    user: UserRow,
    error?: string,
  ) {
    const orgs = await organizationsOf(app.db, user.id, a.tenant_id);
    const confirmed = phaseOf(a) === 'confirmed';
    const mustChoose = !confirmed && orgs.length > 1;
    const radios = html`<fieldset><legend>Organization</legend>${orgs.map(
      (o) => html`
<label><input type="radio" name="organization_id" value="${o.id}"${o.id === a.organization_id ? html` checked` : ''}${mustChoose ? html` required` : ''}> ${o.name}${roleNote(o.role) ? ` (${roleNote(o.role)})` : ''}</label>`,
    )}</fieldset>`;
    const details = html`<dl><dt>Agent</dt><dd>registration ${a.registration_id}</dd>
<dt>Workspace</dt><dd>${a.tenant_name} (kept as it is, added to your account)</dd>
<dt>Claim for</dt><dd>${a.login_hint}</dd>
${orgs.length === 1 ? html`<dt>Organization</dt><dd>${orgs[0]!.name} (the agent will act inside it${roleNote(orgs[0]!.role) ? `; ${roleNote(orgs[0]!.role)}` : ''})</dd>` : ''}</dl>`;
    const deny = html`<button type="submit" name="action" value="deny" formnovalidate>Deny</button>`;
    const form = (inner: Html) => html`<form method="post" action="${pathOf(a)}">
<input type="hidden" name="csrf" value="${csrfFor(a.id, s)}">${inner}</form>`;

    let body: Html;
    if (confirmed) {
      body = html`<p>You confirmed this claim; its code was shown once. You may still change the organization or deny.</p>${details}
${form(html`${orgs.length > 0 ? html`${radios}<button type="submit" name="action" value="organization">Save organization</button>` : ''}${deny}`)}`;
    } else if (mustChoose) {
      body = html`<p>An agent asks to be bound to your account. Confirm only if you started it.</p>${details}
${form(html`<h2>Step 1: choose the organization</h2>
<p>You belong to several organizations. The agent will act inside the one you choose, so choose it before you confirm; the code for the agent is shown only after that.</p>
${radios}
<h2>Step 2: confirm</h2>
<p>Confirming shows the code to give the agent.</p>
<button type="submit" name="action" value="confirm">Confirm</button>${deny}`)}`;
    } else {
      body = html`<p>An agent asks to be bound to your account. Confirm only if you started it.</p>${details}
${form(html`<button type="submit" name="action" value="confirm">Confirm</button>${deny}`)}`;
    }
    return sendPage(
      reply,
      status,
      confirmed ? 'Claim confirmed' : 'Claim an agent',
      html`
${error ? html`<p class="error">${error}</p>` : ''}${body}
<p>Signed in as ${user.email}.</p>`,
    );
  }

  function codePage(reply: FastifyReply, a: AttemptView, userCode: string, expiresIn: number) {
    return sendPage(
      reply,
      200,
      'Give this code to the agent',
      html`
<p>Tell the agent this code. It is valid for ${Math.round(expiresIn / 60)} minutes and is shown only this once.</p>
<p class="code">${userCode}</p>
<p>The agent (registration ${a.registration_id}) will then be bound to your account with workspace ${a.tenant_name}.</p>`,
    );
  }

  /** 404/410/403 for an attempt the page cannot act on; null when it can. */
  function refusal(reply: FastifyReply, a: AttemptView | null) {
    if (!a) return message(reply, 404, 'Claim not found', 'There is no such claim. Check the link the agent gave you.');
    if (config.identity.serviceAuthRegistrationDisabled)
      return message(reply, 403, 'Claiming is turned off', 'Agents cannot be claimed here at the moment.');
    const closed = CLOSED[phaseOf(a)];
    return closed ? message(reply, closed.status, 'This claim is closed', closed.text) : null;
  }

  // ------------------------------------------------------------ routes

  await setUpFormPages(app, message, 'claim page');

  // The authorization_endpoint of the metadata: where a person lands without
  // a claim link, told how to get one.
  app.get(CLAIM_PAGE_PREFIX, { schema: { hide: true } }, async (_request, reply) =>
    message(
      reply,
      200,
      'Claim an agent',
      'Open the claim link your agent gave you. It starts with this address and ends with the claim it belongs to; you sign in there with your own account.',
    ),
  );

  app.get(
    `${CLAIM_PAGE_PREFIX}/:attemptId`,
    { schema: { hide: true, operationId: 'getClaimPage', tags: ['identity'], params: Params } },
    async (request, reply) => {
      const attempt = await findAttempt(app.db, request.params.attemptId);
      const refused = refusal(reply, attempt);
      if (refused || !attempt) return refused;
      const session = (await readSession(request)) ?? (await startSession(reply, null));
      const user = session.userId ? await findUser(app.db, session.userId) : null;
      if (!user) return signInPage(reply, 200, attempt, session.userId ? await startSession(reply, null) : session);
      if (!sameEmail(user.email, attempt.login_hint)) {
        return signInPage(
          reply,
          403,
          attempt,
          session,
          `You are signed in as ${user.email}. This claim is for ${attempt.login_hint}; sign in as that account.`,
        );
      }
      return decisionPage(reply, 200, attempt, session, user);
    },
  );

  app.post(
    `${CLAIM_PAGE_PREFIX}/:attemptId`,
    { schema: { hide: true, operationId: 'postClaimPage', tags: ['identity'], params: Params, body: Form.optional() } },
    async (request, reply) => {
      const form: Form = request.body ?? {};
      const attempt = await findAttempt(app.db, request.params.attemptId);
      const refused = refusal(reply, attempt);
      if (refused || !attempt) return refused;
      const session = await readSession(request);
      if (!sessions.checkCsrf(attempt.id, session, form.csrf)) {
        return message(
          reply,
          403,
          'Form expired',
          'This form has expired or did not come from this page. Open the claim link again.',
          pathOf(attempt),
        );
      }
      if (form.action === 'signin') return signIn(request, reply, attempt, session, form);
      if (!['confirm', 'deny', 'organization'].includes(form.action ?? ''))
        return message(reply, 400, 'Unknown action', 'Choose Confirm or Deny.', pathOf(attempt));

      const user = session.userId ? await findUser(app.db, session.userId) : null;
      if (!user) return signInPage(reply, 401, attempt, session, 'Sign in first.');
      const input = {
        attemptId: attempt.id,
        userId: user.id,
        userEmail: user.email,
        organizationId: form.organization_id || null,
      };
      try {
        if (form.action === 'confirm') {
          if (!input.organizationId && (await organizationsOf(app.db, user.id, attempt.tenant_id)).length > 1) {
            return decisionPage(reply, 400, attempt, session, user, CHOOSE_FIRST);
          }
          const { userCode, expiresIn } = await confirmAttempt(app.db, input);
          request.log.info({ attemptId: attempt.id, userId: user.id }, 'claim confirmed');
          return codePage(reply, attempt, userCode, expiresIn);
        }
        if (form.action === 'deny') {
          await denyAttempt(app.db, input);
          request.log.info({ attemptId: attempt.id, userId: user.id }, 'claim denied');
          return message(
            reply,
            200,
            'Claim denied',
            'The agent will not be bound to your account. Its claim is revoked.',
          );
        }
        await selectOrganization(app.db, input);
        return seeOther(reply, pathOf(attempt));
      } catch (error) {
        if (!(error instanceof ClaimError)) throw error;
        if (error.code === 'wrong_account')
          return signInPage(reply, 403, attempt, session, `${error.message} Sign in as that account.`);
        if (error.code === 'invalid_organization')
          return decisionPage(reply, 400, attempt, session, user, error.message);
        return message(reply, error.code === 'attempt_not_found' ? 404 : 410, 'This claim is closed', error.message);
      }
    },
  );

  async function signIn(
    request: FastifyRequest,
    reply: FastifyReply,
    a: AttemptView,
    s: Session,
    form: Form,
  ): Promise<FastifyReply> {
    if (!form.email || !form.password) return signInPage(reply, 400, a, s, 'Enter your e-mail and password.');
    // A claim never binds to another account, so another e-mail is refused before any password check.
    if (!sameEmail(form.email.trim(), a.login_hint)) {
      return signInPage(reply, 403, a, s, `This claim is for ${a.login_hint}; sign in as that account.`);
    }
    const signedIn = await passwordSignIn(app, request, reply, form.email.trim(), form.password);
    if ('locked' in signedIn) return message(reply, 429, 'Too many sign-in attempts', signedIn.locked);
    if ('wrong' in signedIn || !sameEmail(signedIn.user.email, a.login_hint))
      return signInPage(reply, 401, a, s, 'E-mail or password is wrong.');
    const { user } = signedIn;
    await startSession(reply, user.id);
    request.log.info({ attemptId: a.id, userId: user.id }, 'signed in on the claim page');
    return seeOther(reply, pathOf(a));
  }
};

export default claimPageRoutes;
