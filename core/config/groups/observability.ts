// Logs and metrics.
import { z } from 'zod';
import { group, setting } from '../declare.ts';
import { intFromEnv, nonEmpty } from '../parsers.ts';

export const observability = group('Logs and metrics', undefined, {
  LOG_LEVEL: setting(z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']), {
    default: 'info',
    doc: '`fatal`, `error`, `warn`, `info`, `debug`, `trace` or `silent`',
  }),
  LOG_FORMAT: setting(z.enum(['auto', 'json', 'pretty']), {
    default: 'auto',
    doc: '`json`, `pretty` (readable lines), or `auto`: pretty in development on a terminal, JSON otherwise',
  }),
  METRICS_TOKEN: setting(z.string().min(16, 'must be at least 16 characters'), {
    doc: "Enables `GET /metrics` on the api's port for `Authorization: Bearer <token>` (16+ characters)",
  }),
  METRICS_PORT: setting(intFromEnv(0, 65535), {
    default: 0,
    shown: '`0` (off)',
    doc: 'A separate `/metrics` listener without a token in every process (api, worker, `npm start`)',
  }),
  METRICS_HOST: setting(nonEmpty, {
    default: '127.0.0.1',
    doc: 'Interface of that listener; keep it on a private network',
  }),
});
