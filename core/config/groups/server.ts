// The process itself and its HTTP server.
import { z } from 'zod';
import { group, setting } from '../declare.ts';
import { boolFromEnv, corsOrigins, intFromEnv, nonEmpty, urlFromEnv } from '../parsers.ts';

export const server = group('Process and HTTP server', undefined, {
  NODE_ENV: setting(z.enum(['development', 'production', 'test']), {
    default: 'development',
    doc: '`production` requires every secret and a migrated database, and refuses the billing sandbox; `test` is for the test suite',
  }),
  HOST: setting(nonEmpty, { default: '127.0.0.1', doc: 'Address the api listens on (`0.0.0.0` in containers)' }),
  PORT: setting(intFromEnv(0, 65535), {
    default: 3000,
    doc: 'Port the api listens on (`0` picks a free one, and every URL the service generates names the port picked). A port in use stops the process at once, before the database or a worker starts, with a hint',
  }),
  BASE_URL: setting(urlFromEnv, {
    shown: '`http://localhost:$PORT`',
    doc: 'Public origin of the service (`{base_url}` of the spec)',
  }),
  AUTH_URL: setting(urlFromEnv, {
    shown: '`BASE_URL`',
    doc: 'Public origin of the identity provider (`{auth_url}`); by default the same process serves both',
  }),
  TRUST_PROXY: setting(boolFromEnv, { default: false, doc: 'Trust `X-Forwarded-For` (only behind your own proxy)' }),
  CORS_ORIGINS: setting(corsOrigins, {
    shown: 'unset (CORS off)',
    doc: 'Comma-separated browser origins (`https://app.example.com`) allowed to call the API; exact match, no credentials',
  }),
  REQUEST_TIMEOUT_MS: setting(intFromEnv(1_000, 3_600_000), {
    default: 30_000,
    doc: "A request's headers and body must arrive within this time (`408` otherwise)",
  }),
  CONNECTION_TIMEOUT_MS: setting(intFromEnv(1_000, 3_600_000), {
    default: 120_000,
    doc: 'An idle HTTP socket is closed after this time (websockets are exempt once upgraded)',
  }),
  KEEP_ALIVE_TIMEOUT_MS: setting(intFromEnv(1_000, 3_600_000), {
    default: 72_000,
    doc: 'How long a keep-alive socket waits for its next request',
  }),
  MAX_REQUESTS_PER_SOCKET: setting(intFromEnv(0, 1_000_000), {
    default: 1_000,
    doc: 'Requests one keep-alive socket may carry (`0` = no limit)',
  }),
  SHUTDOWN_TIMEOUT_MS: setting(intFromEnv(100, 600_000), {
    default: 10_000,
    doc: 'How long a stopping process waits for requests and jobs',
  }),
});
