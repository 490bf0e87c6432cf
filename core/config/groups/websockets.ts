// Websocket connections (job updates and streams).
import { group, setting } from '../declare.ts';
import { intFromEnv } from '../parsers.ts';

export const websockets = group('Websockets', undefined, {
  WS_HEARTBEAT_MS: setting(intFromEnv(100, 600_000), {
    default: 30_000,
    doc: 'Websocket ping interval; a peer that misses a pong is dropped',
  }),
  WS_MAX_BUFFERED_BYTES: setting(intFromEnv(1024, 64 * 1024 * 1024), {
    default: 1024 * 1024,
    doc: 'A websocket client that lets this much pile up is disconnected',
  }),
  WS_MAX_SUBSCRIPTIONS: setting(intFromEnv(1, 10_000), {
    default: 100,
    doc: 'Jobs one websocket connection may follow at once',
  }),
  WS_AUTH_TIMEOUT_MS: setting(intFromEnv(100, 600_000), {
    default: 10_000,
    doc: 'Time to authenticate a websocket that sent no Authorization header',
  }),
});
