// Who is at the console: a signed page session (api/pages/session.ts) on
// /console only, HttpOnly, SameSite=Strict, Secure when served over https;
// the person behind it must be a platform operator at every request (a
// demoted operator loses the console at once, not when the cookie expires).
import type { FastifyRequest } from 'fastify';
import { findUser, type UserRow } from '../../../core/accounts/users.ts';
import type { Config } from '../../../core/config.ts';
import type { CommonQueryMethods } from '../../../core/db/pool.ts';
import { pageSessions, type PageSession, type PageSessions } from '../../pages/session.ts';

export const CONSOLE_PREFIX = '/console';
/** A working day: the console is left open on a screen. */
export const CONSOLE_SESSION_TTL_S = 8 * 3600;
/** Every console form's CSRF token is bound to this subject, the session and its user. */
export const CSRF_SUBJECT = 'console';

export function consoleSessions(config: Config, db: CommonQueryMethods): PageSessions {
  return pageSessions({
    db,
    purpose: 'operator-console',
    cookie: 'console_session',
    path: CONSOLE_PREFIX,
    secure: config.baseUrl.startsWith('https:'),
    secret: config.secrets.PLATFORM_JWT_SECRET,
    ttlS: CONSOLE_SESSION_TTL_S,
  });
}

export type ConsoleVisitor =
  | { kind: 'anonymous'; session: PageSession | null }
  | { kind: 'refused'; session: PageSession; user: UserRow }
  | { kind: 'operator'; session: PageSession; user: UserRow };

export async function consoleVisitor(
  db: CommonQueryMethods,
  sessions: PageSessions,
  request: FastifyRequest,
): Promise<ConsoleVisitor> {
  const session = await sessions.read(request);
  if (!session?.userId) return { kind: 'anonymous', session };
  const user = await findUser(db, session.userId);
  if (!user) return { kind: 'anonymous', session: null };
  return user.is_operator ? { kind: 'operator', session, user } : { kind: 'refused', session, user };
}
