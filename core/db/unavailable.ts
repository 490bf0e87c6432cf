// Telling "PostgreSQL is unreachable right now" apart from every other
// database error. Such errors are answered 503 with Retry-After, waited out
// by the worker, and never end a process; anything else is a bug or bad data.
import { BackendTerminatedError, BackendTerminatedUnexpectedlyError, ConnectionError } from 'slonik';
import { errorChain } from './errors.ts';

/** Network and server states that mean the database is down or restarting. */
const CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  '57P01', // admin_shutdown: the server is stopping
  '57P02', // crash_shutdown
  '57P03', // cannot_connect_now: starting up or shutting down
  '08000', // connection_exception
  '08001', // sqlclient_unable_to_establish_sqlconnection
  '08003', // connection_does_not_exist
  '08004', // sqlserver_rejected_establishment_of_sqlconnection
  '08006', // connection_failure
  // read_only_sql_transaction: a demoted primary (a failover under way) still
  // answers, read-only, until the proxy moves its connections to the new one.
  '25006',
]);

/** pg reports a dropped socket by message only. */
const MESSAGES = [
  'Connection terminated',
  'connection terminated',
  'Client has encountered a connection error',
  'Connection is closed',
  'timeout exceeded when trying to connect',
  'Cannot use a pool after calling end',
];

/** Raised where the outage is known but its own error is gone (the billing sandbox answered through the Stripe SDK). */
export class DatabaseUnavailableError extends Error {
  override name = 'DatabaseUnavailableError';
}

export function isDatabaseUnavailable(error: unknown): boolean {
  for (const e of errorChain(error)) {
    if (
      e instanceof DatabaseUnavailableError ||
      e instanceof ConnectionError ||
      e instanceof BackendTerminatedError ||
      e instanceof BackendTerminatedUnexpectedlyError
    )
      return true;
    const { code, message } = e as { code?: unknown; message?: unknown };
    if (typeof code === 'string' && CODES.has(code)) return true;
    if (typeof message === 'string' && MESSAGES.some((m) => message.includes(m))) return true;
  }
  return false;
}

/** Seconds a client should wait before retrying while the database is away. */
export const DATABASE_RETRY_AFTER_S = 2;

/**
 * Runs `write` again while PostgreSQL is unreachable (backing off up to 2 s),
 * until it succeeds, fails for another reason, or `signal` aborts. For writes
 * a process must not give up on during an outage, such as recording a job's
 * failed attempt: handing the error on would let the job's queue go, and a
 * session's next turn could overtake it.
 */
export async function retryWhileUnavailable<T>(
  write: () => Promise<T>,
  options: { signal?: AbortSignal | undefined; onWait?: (error: unknown) => void } = {},
): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await write();
    } catch (error) {
      if (!isDatabaseUnavailable(error) || options.signal?.aborted) throw error;
      if (attempt === 0) options.onWait?.(error);
      const delay = Math.min(2_000, 100 * 2 ** Math.min(attempt, 5)) * (0.75 + Math.random() / 2);
      await new Promise((resolve) => setTimeout(resolve, delay));
    }
  }
}
