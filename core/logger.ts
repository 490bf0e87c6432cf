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

export function loggerOptions(level: string, name: string): LoggerOptions {
  return {
    name,
    level,
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
