// Graphile Worker logs through pino like the rest of the platform.
import { Logger as WorkerLogger } from 'graphile-worker';
import type { Logger } from 'pino';

export function graphileLogger(logger: Logger): WorkerLogger {
  return new WorkerLogger((scope) => (level, message, meta) => {
    const fields = { ...scope, ...(meta ?? {}) } as Record<string, unknown>;
    const method = level === 'warning' ? 'warn' : level === 'error' ? 'error' : level === 'debug' ? 'debug' : 'info';
    logger[method](fields, message);
  });
}
