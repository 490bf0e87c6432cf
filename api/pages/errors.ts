// How a page route answers an error it did not handle: a 4xx as refused, an
// outage of PostgreSQL as 503 with Retry-After (a warning: the soak restarts
// the database under load), anything else 500 with its stack in the log.
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { DATABASE_RETRY_AFTER_S, isDatabaseUnavailable } from '../../core/db/unavailable.ts';

export type PageFailure = { status: number; title: string; text: string };

/** Logs the error as it deserves and says which page to answer with (Retry-After set when it helps). */
export function pageFailure(
  error: FastifyError,
  request: FastifyRequest,
  reply: FastifyReply,
  what: string,
): PageFailure {
  const status =
    typeof error.statusCode === 'number' && error.statusCode >= 400 && error.statusCode < 500 ? error.statusCode : 500;
  if (status < 500) return { status, title: 'Request refused', text: 'The request could not be handled.' };
  if (isDatabaseUnavailable(error)) {
    request.log.warn({ reason: error.message }, `${what}: database unavailable; answered 503`);
    reply.header('retry-after', String(DATABASE_RETRY_AFTER_S));
    return {
      status: 503,
      title: 'Temporarily unavailable',
      text: `The service cannot reach its database right now. Please try again in a few seconds.`,
    };
  }
  request.log.error({ err: error }, `${what} failed`);
  return { status: 500, title: 'Something went wrong', text: 'Please try again.' };
}
