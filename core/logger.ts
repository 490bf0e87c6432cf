// pino everywhere: api, worker, ops scripts. Secrets never reach a log line:
// the redaction list covers headers and the body fields that carry credentials.
import pino, { type LoggerOptions } from 'pino';

export const REDACT_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'req.headers["x-api-key"]',
  'req.headers["idempotency-key"]',
  'res.headers["set-cookie"]',
  '*.password',
  '*.token',
  '*.access_token',
  '*.refresh_token',
  '*.assertion',
  '*.claim_token',
  '*.user_code',
  '*.secret',
  '*.apiKey',
  '*.api_key',
  '*.key',
  '*.licenseKey',
  'connectionString',
  'databaseUrl',
];

// Database errors carry the query's bound values and, for a row that failed
// its schema, the row itself: either may hold a hash or a sealed secret.
const DATABASE_ERROR_FIELDS = ['values', 'row', 'parameters'];
function serializeError(error: unknown) {
  const serialized = pino.stdSerializers.err(error as Error) as unknown as Record<string, unknown>;
  for (const field of DATABASE_ERROR_FIELDS) delete serialized[field];
  return serialized;
}

export function loggerOptions(level: string, name: string): LoggerOptions {
  return {
    name,
    level,
    serializers: { err: serializeError },
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    base: { pid: process.pid },
  };
}

export function createLogger(level: string, name: string): pino.Logger {
  return pino(loggerOptions(level, name));
}

/** Connection strings are logged without their password. */
export function safeDatabaseUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return '(unparseable url)';
  }
}
