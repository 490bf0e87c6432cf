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
// are the other sign-in pages' (api/pages/session.ts).// This file holds the routes and the token's cookie; the pages' HTML and the
// script are in accept-page-views.ts.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { findUser, type UserRow } from '../../../core/accounts/users.ts';
import { hashPassword, PASSWORD_MAX_LENGTH, PASSWORD_MIN_LENGTH } from '../../../core/crypto/passwords.ts';
import { nameProblem } from '../../../core/names.ts';
import { LIMITS } from '../../../core/rate-limit.ts';
import { inspectInvitation, type InvitationView } from '../../../core/teams/invitation-acceptance.ts';
import { PlatformHttpError } from '../../errors.ts';
import { html } from '../../pages/layout.ts';
import {
  pageSessions,
  passwordSignIn,
  seeOther,
  setUpFormPages,
  type PageSession,
  type PageSessions,
} from '../../pages/session.ts';
import { acceptFor } from './accept.ts';
import {
  ACCEPT_PAGE,
  INVITE_SCRIPT,
  invitationPage,
  linkGone,
  message,
  openPage,
  page,
  PREFIX,
  type Csrf,
} from './accept-page-views.ts';

const COOKIE = 'invitation_token';
const COOKIE_TTL_S = 30 * 60;

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

/** What the routes share: the app, the page's sessions, and whether cookies are Secure. */
type Context = { app: FastifyInstance; sessions: PageSessions; secure: boolean };

// The link's token, kept in an HttpOnly cookie from the open form's post on.
const tokenOf = (request: FastifyRequest): string | null => {
  for (const cookie of (request.headers.cookie ?? '').split(';')) {
    const [name, value] = cookie.trim().split('=');
    if (name === COOKIE && value) return decodeURIComponent(value);
  }
  return null;
};
const keepToken = (reply: FastifyReply, token: string | null, secure: boolean) =>
  reply.header(
    'set-cookie',
    `${COOKIE}=${token ? encodeURIComponent(token) : ''}; Path=${PREFIX}; Max-Age=${token ? COOKIE_TTL_S : 0}; HttpOnly; SameSite=Strict${secure ? '; Secure' : ''}`,
  );

/** The CSRF tokens of the forms a page shows in this session. */
function csrfOf(sessions: PageSessions, s: PageSession): Csrf {
  return (subject) => sessions.csrf(subject, s);
}
const signedIn = async (app: FastifyInstance, s: PageSession | null): Promise<UserRow | null> =>
  s?.userId ? findUser(app.db, s.userId) : null;

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
  const context: Context = { app, sessions, secure };

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
    if (!view) return openPage(reply, 200, csrfOf(sessions, session));
    return invitationPage(reply, 200, view, csrfOf(sessions, session), await signedIn(app, session));
  });

  app.post(
    ACCEPT_PAGE,
    { onRequest: app.rateLimit(LIMITS.invitationAccept), schema: { hide: true, body: Form.optional() } },
    async (request, reply) => postForm(context, request, reply, request.body ?? {}),
  );
};

/** A form posted on the page: open a link's token, sign in or out, join, or make the account and join. */
async function postForm(context: Context, request: FastifyRequest, reply: FastifyReply, form: Form) {
  const { app, sessions, secure } = context;
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
    keepToken(reply, null, secure);
    return linkGone(reply, csrfOf(sessions, session));
  }
  if (form.action === 'open') {
    keepToken(reply, token, secure);
    return seeOther(reply, ACCEPT_PAGE);
  }
  if (form.action === 'signin') return signIn(context, request, reply, view, session, form);
  return join(context, request, reply, view, session, token!, form);
}

/** Joins the signed-in person (accept), or makes the invited address's account and joins it (create). */
async function join(
  { app, sessions }: Context,
  request: FastifyRequest,
  reply: FastifyReply,
  view: InvitationView,
  session: PageSession,
  token: string,
  form: Form,
) {
  const user = await signedIn(app, session);
  try {
    if (form.action === 'accept') {
      if (!user) return invitationPage(reply, 401, view, csrfOf(sessions, session), null, 'Sign in first.');
      await acceptFor(app, request, token, { userId: user.id });
      return seeOther(reply, ACCEPT_PAGE);
    }
    const name = (form.name ?? '').trim();
    const password = form.password ?? '';
    const wrong =
      nameProblem(form.name ?? '') ??
      (password.length < PASSWORD_MIN_LENGTH || password.length > PASSWORD_MAX_LENGTH
        ? `Choose a password of ${PASSWORD_MIN_LENGTH} to ${PASSWORD_MAX_LENGTH} characters.`
        : password !== form.confirm
          ? 'The two passwords differ.'
          : null);
    if (wrong) return invitationPage(reply, 400, view, csrfOf(sessions, session), user, wrong);
    const joined = await acceptFor(app, request, token, {
      newAccount: { displayName: name, passwordHash: await hashPassword(password) },
    });
    await sessions.start(reply, joined.user.id);
    return seeOther(reply, ACCEPT_PAGE);
  } catch (error) {
    if (!(error instanceof PlatformHttpError)) throw error;
    const fresh = (await inspectInvitation(app.db, token)) ?? view;
    return invitationPage(reply, error.status, fresh, csrfOf(sessions, session), user, error.message);
  }
}

async function signIn(
  { app, sessions }: Context,
  request: FastifyRequest,
  reply: FastifyReply,
  view: InvitationView,
  s: PageSession,
  form: Form & { email?: string },
) {
  const csrf = csrfOf(sessions, s);
  if (!form.password) return invitationPage(reply, 400, view, csrf, null, 'Enter your password.');
  const outcome = await passwordSignIn(app, request, reply, view.email, form.password);
  if ('locked' in outcome) return message(reply, 429, 'Too many sign-in attempts', outcome.locked);
  if ('wrong' in outcome) return invitationPage(reply, 401, view, csrf, null, 'The password is wrong.');
  await sessions.start(reply, outcome.user.id);
  request.log.info({ userId: outcome.user.id, invitationId: view.id }, 'signed in on the invitation page');
  return seeOther(reply, ACCEPT_PAGE);
}

export default acceptPageRoutes;
