// pino everywhere: api, worker, ops scripts. Secrets never reach a log line:
// the redaction list covers headers and the body fields that carry credentials.
import pino, { type DestinationStream, type Logger, type LoggerOptions } from 'pino';
import type PinoPretty from 'pino-pretty';
import { lazyRequire } from './lazy-require.ts';

/** pino-pretty, loaded only by a process that prints readable lines. */
const pinoPretty = lazyRequire<typeof PinoPretty>('pino-pretty');

export const REDACT_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'req.headers["x-api-key"]',
  'req.headers["idempotency-key"]',
  'res.headers["set-cookie"]',
  '*.password',
  '*.token',
  '*.link',
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

export type LogFormat = 'auto' | 'json' | 'pretty';
export type LogOutput = {
  /** auto: readable lines in development on a terminal, JSON otherwise. */
  format?: LogFormat;
  nodeEnv?: string;
  /** Where lines go (stdout by default). */
  destination?: NodeJS.WritableStream;
  /** Whether the destination is a terminal (colours; auto); stdout's by default. */
  isTTY?: boolean;
};

/** Readable lines instead of JSON? Never in tests (NODE_ENV=test) unless asked for explicitly. */
export function wantsPrettyLogs({
  format = 'json',
  nodeEnv = process.env.NODE_ENV,
  isTTY = process.stdout.isTTY === true,
}: LogOutput = {}): boolean {
  return format === 'pretty' || (format === 'auto' && nodeEnv === 'development' && isTTY);
}

/**
 * The stream a logger of this output writes to: pino-pretty for readable
 * lines, else undefined (pino's own JSON on stdout) or the given destination.
 * pino redacts and serialises before the stream sees a line, so readable
 * lines are redacted exactly like JSON ones.
 */
export function logStream(output: LogOutput = {}): DestinationStream | undefined {
  if (!wantsPrettyLogs(output)) return (output.destination as DestinationStream | undefined) ?? stdoutDestination();
  return pinoPretty()({
    destination: output.destination ?? 1,
    sync: output.destination === undefined, // nothing lost when a process exits right after logging
    colorize: output.isTTY ?? (output.destination === undefined && process.stdout.isTTY === true),
    translateTime: 'SYS:HH:MM:ss.l',
    ignore: 'pid,hostname',
    // One line per event: its fields follow the message on the same line.
    singleLine: true,
  });
}

/**
 * JSON lines on stdout, written synchronously: a line logged right before
 * exit is out, and no buffer is left for an exit-time flush. When stdout is
 * gone (a closed terminal answers EIO, a reader that left EPIPE) further
 * lines are dropped: the process still shuts down cleanly (pino's own
 * asynchronous stdout retried such a flush for ever at exit).
 */
function stdoutDestination(): DestinationStream {
  const stream = pino.destination({ fd: 1, sync: true });
  stream.on('error', () => {
    stream.write = () => true;
    stream.flushSync = () => undefined;
  });
  return stream;
}

/** createLogger(level, name) logs JSON to stdout; process entries pass { format: config.logFormat, nodeEnv }. */
export function createLogger(level: string, name: string, output?: LogOutput): pino.Logger {
  const stream = logStream(output);
  return stream ? pino(loggerOptions(level, name), stream) : pino(loggerOptions(level, name));
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

const LEVEL_METHODS: ReadonlySet<string> = new Set(['fatal', 'error', 'warn', 'info', 'debug', 'trace']);
const noop = () => undefined;

/**
 * A child logger made only when a line is written at an enabled level: a
 * worker makes one per job, thousands a second, and pino's child (with the
 * redaction paths) costs more than most jobs' own work.
 */
export function lazyChild(parent: Logger, bindings: Record<string, unknown>): Logger {
  let child: Logger | null = null;
  const real = () => (child ??= parent.child(bindings));
  return new Proxy({} as Logger, {
    get(_target, prop) {
      if (typeof prop === 'string' && LEVEL_METHODS.has(prop) && child === null && !parent.isLevelEnabled(prop))
        return noop;
      const target = real();
      const value = Reflect.get(target, prop, target) as unknown;
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}
