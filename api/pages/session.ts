// Sessions of the pages where a person signs in with e-mail and password
// (the console, the claim page, the board approval page): a signed cookie
// scoped to the page's path, a new session id at every start (also at
// sign-in, so a planted cookie never becomes a signed-in one), CSRF tokens
// bound to the session, the signed-in user and what the form acts on, and
// sign-in under the login budget every login shares. A signed-in session is
// also a row of page_sessions (0044), checked at every read: signing out ends
// it on the server, so a copied cookie dies with it. Also the HTML error
// handler and form parser these pages share.
//
// Why not @fastify/session and @fastify/csrf-protection: a session there is
// a store row from the first visit (here an anonymous visitor writes
// nothing), and our CSRF tokens are bound to the session, its user and the
// one thing a form acts on, which a per-session secret alone is not.
import { createHash, createHmac } from 'node:crypto';
import formbody from '@fastify/formbody';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { constantTimeEqual, randomToken } from '../../core/crypto/tokens.ts';
import { checkPassword, type UserRow } from '../../core/accounts/users.ts';
import { z } from 'zod';
import { sql, type CommonQueryMethods } from '../../core/db/pool.ts';
import { RateLimitedError } from '../errors.ts';
import { loginWithinBudget } from '../login-budget.ts';
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
  /** Where signed-in sessions are kept. */
  db: CommonQueryMethods;
};

export type PageSessions = {
  /** The request's session: null without a valid cookie, or when its signed-in session was ended. */
  read(request: FastifyRequest): Promise<PageSession | null>;
  /** Starts a new session (new id) and sets its cookie; a signed-in one gets its row first. */
  start(reply: FastifyReply, userId: string | null): Promise<PageSession>;
  /** Ends a signed-in session on the server (sign-out): its cookie, wherever it was copied, no longer signs anyone in. */
  end(session: PageSession | null): Promise<void>;
  /** Which of these session ids are still live (not ended, not expired): for connections that outlive a request. */
  live(sids: string[]): Promise<Set<string>>;
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
  const sidHash = (sid: string) => createHash('sha256').update(sid).digest();
  const { db, purpose } = options;

  /** The cookie's session if its signature and time are good (not yet whether it was ended). */
  const signed = (request: FastifyRequest): PageSession | null => {
    const cookies = (request.headers.cookie ?? '').split(';').map((c) => c.trim());
    for (const cookie of cookies) {
      if (!cookie.startsWith(`${name}=`)) continue;
      const [sid, user, exp, tag, ...rest] = cookie.slice(name.length + 1).split('.');
      if (!sid || !user || !exp || !tag || rest.length > 0) continue;
      if (!constantTimeEqual(tag, mac(`${sid}.${user}.${exp}`)) || Number(exp) <= Date.now() / 1000) continue;
      return { sid, userId: user === '-' ? null : user };
    }
    return null;
  };

  return {
    async read(request) {
      const session = signed(request);
      if (!session?.userId) return session;
      const live = await db.exists(sql.unsafe`
        select from page_sessions where sid_hash = ${sql.binary(sidHash(session.sid))} and purpose = ${purpose}
          and user_id = ${session.userId} and ended_at is null and expires_at > now()`);
      return live ? session : null;
    },
    async start(reply, userId) {
      const session = { sid: randomToken('', 18), userId };
      if (userId) {
        await db.query(sql.unsafe`
          insert into page_sessions (sid_hash, purpose, user_id, expires_at)
          values (${sql.binary(sidHash(session.sid))}, ${purpose}, ${userId}, now() + make_interval(secs => ${ttl}))`);
      }
      const exp = Math.floor(Date.now() / 1000) + ttl;
      const payload = `${session.sid}.${userId ?? '-'}.${exp}`;
      const flags = `Path=${options.path}; Max-Age=${ttl}; HttpOnly; SameSite=Strict${options.secure ? '; Secure' : ''}`;
      reply.header('set-cookie', `${name}=${payload}.${mac(payload)}; ${flags}`);
      return session;
    },
    async live(sids) {
      if (sids.length === 0) return new Set();
      const hashes = new Map(sids.map((sid) => [sidHash(sid).toString('hex'), sid]));
      const found = await db.anyFirst(sql.type(z.object({ h: z.string() }))`
        select encode(sid_hash, 'hex') as h from page_sessions
        where sid_hash = any(${sql.array(
          [...hashes.keys()].map((h) => Buffer.from(h, 'hex')),
          'bytea',
        )})
          and purpose = ${purpose} and ended_at is null and expires_at > now()`);
      return new Set(found.map((h) => hashes.get(h)!));
    },
    async end(session) {
      if (!session?.userId) return;
      await db.query(
        sql.unsafe`update page_sessions set ended_at = now() where sid_hash = ${sql.binary(sidHash(session.sid))} and ended_at is null`,
      );
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
  try {
    const user = await loginWithinBudget(
      app,
      request,
      { kind: 'login', email },
      () => checkPassword(app.db, email, password),
      { what: 'sign-in' },
    );
    return user ? { user } : { wrong: true };
  } catch (error) {
    if (!(error instanceof RateLimitedError)) throw error;
    reply.header('retry-after', String(error.retryAfterSeconds));
    return { locked: error.message };
  }
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
  if (!app.hasContentTypeParser('application/x-www-form-urlencoded'))
    await app.register(formbody, { bodyLimit: 16_384 });
  app.setErrorHandler((error: FastifyError, request, reply) => {
    const failure = pageFailure(error, request, reply, what);
    return message(reply, failure.status, failure.title, failure.text);
  });
}

/** A 303 to the page itself after a form post (post/redirect/get). */
export const seeOther = (reply: FastifyReply, path: string) => reply.code(303).header('location', path).send();
