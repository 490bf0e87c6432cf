// Sessions of the pages where a person signs in with e-mail and password
// (the claim page, the board approval page): a short-lived signed cookie
// scoped to the page's path, a new session id at every start (also at
// sign-in, so a planted cookie never becomes a signed-in one), CSRF tokens
// bound to the session, the signed-in user and what the form acts on, and
// sign-in under the login budget every login shares. Also the HTML error
// handler and form parser these pages share.
import { createHmac } from 'node:crypto';
import formbody from '@fastify/formbody';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { constantTimeEqual, randomToken } from '../../core/crypto/tokens.ts';
import { lockoutMessage, throttledLogin } from '../../core/accounts/login-throttle.ts';
import { checkPassword, type UserRow } from '../../core/accounts/users.ts';
import { pageFailure } from './errors.ts';

export type PageSession = { sid: string; userId: string | null };

export type PageSessionOptions = {
  /** Names the signing key, so a session of one page never passes on another (nor as a platform JWT). */
  purpose: string;
  cookie: string;
  /** The cookie's Path: the browser sends it to these pages only. */
  path: string;
  /** Whether the pages are served over https (adds Secure). */
  secure: boolean;
  secret: Buffer;
  ttlS?: number;
};

export type PageSessions = {
  read(request: FastifyRequest): PageSession | null;
  /** Starts a new session (new id) and sets its cookie. */
  start(reply: FastifyReply, userId: string | null): PageSession;
  /** The CSRF token of forms acting on `subject` in this session. */
  csrf(subject: string, session: PageSession): string;
  /** Whether a posted token belongs to this session and subject. */
  checkCsrf(subject: string, session: PageSession | null, token: string | undefined): session is PageSession;
};

export const SESSION_TTL_S = 15 * 60;

export function pageSessions(options: PageSessionOptions): PageSessions {
  const ttl = options.ttlS ?? SESSION_TTL_S;
  const key = createHmac('sha256', options.secret).update(options.purpose).digest();
  const mac = (data: string) => createHmac('sha256', key).update(data).digest('base64url');
  const name = options.cookie;
  const csrf = (subject: string, s: PageSession) => mac(`csrf|${subject}|${s.sid}|${s.userId ?? '-'}`);

  return {
    read(request) {
      const cookies = (request.headers.cookie ?? '').split(';').map((c) => c.trim());
      for (const cookie of cookies) {
        if (!cookie.startsWith(`${name}=`)) continue;
        const [sid, user, exp, tag, ...rest] = cookie.slice(name.length + 1).split('.');
        if (!sid || !user || !exp || !tag || rest.length > 0) continue;
        if (!constantTimeEqual(tag, mac(`${sid}.${user}.${exp}`)) || Number(exp) <= Date.now() / 1000) continue;
        return { sid, userId: user === '-' ? null : user };
      }
      return null;
    },
    start(reply, userId) {
      const session = { sid: randomToken('', 18), userId };
      const exp = Math.floor(Date.now() / 1000) + ttl;
      const payload = `${session.sid}.${userId ?? '-'}.${exp}`;
      const flags = `Path=${options.path}; Max-Age=${ttl}; HttpOnly; SameSite=Strict${options.secure ? '; Secure' : ''}`;
      reply.header('set-cookie', `${name}=${payload}.${mac(payload)}; ${flags}`);
      return session;
    },
    csrf,
    checkCsrf(subject, session, token): session is PageSession {
      return !!session && !!token && constantTimeEqual(token, csrf(subject, session));
    },
  };
}

/**
 * A sign-in with e-mail and password under the login budget of
 * `POST /api/auth/login`: a wrong password counts, a correct one does not.
 * A lockout sets Retry-After and answers what the person should read.
 */
export async function passwordSignIn(
  app: FastifyInstance,
  request: FastifyRequest,
  reply: FastifyReply,
  email: string,
  password: string,
): Promise<{ user: UserRow } | { wrong: true } | { locked: string }> {
  const outcome = await throttledLogin(app.db, app.config.loginThrottle, { account: { kind: 'login', email }, address: request.ip }, () => checkPassword(app.db, email, password));
  if ('locked' in outcome) {
    request.log.warn({ scope: outcome.locked.scope, retryAfter: outcome.locked.retryAfterSeconds }, 'sign-in refused: locked out');
    reply.header('retry-after', String(outcome.locked.retryAfterSeconds));
    return { locked: lockoutMessage(outcome.locked) };
  }
  return 'failed' in outcome ? { wrong: true } : { user: outcome.ok };
}

/**
 * What every sign-in page plugin needs in its (encapsulated) context: the
 * form parser, and errors answered as a page instead of JSON.
 */
export async function setUpFormPages(
  app: FastifyInstance,
  message: (reply: FastifyReply, status: number, title: string, text: string) => FastifyReply,
  what: string,
): Promise<void> {
  if (!app.hasContentTypeParser('application/x-www-form-urlencoded')) await app.register(formbody, { bodyLimit: 16_384 });
  app.setErrorHandler((error: FastifyError, request, reply) => {
    const failure = pageFailure(error, request, reply, what);
    return message(reply, failure.status, failure.title, failure.text);
  });
}

/** A 303 to the page itself after a form post (post/redirect/get). */
export const seeOther = (reply: FastifyReply, path: string) => reply.code(303).header('location', path).send();
