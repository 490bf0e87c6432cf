// What operators need at the HTTP edge: CORS for the browser origins of
// CORS_ORIGINS (none: no CORS headers at all), and Prometheus metrics —
// request durations by route pattern, websocket and LISTEN gauges, job and
// queue gauges read at scrape time. GET /metrics exists on this port only
// when METRICS_TOKEN is set, for `Authorization: Bearer <token>`; without it
// operators use the METRICS_PORT listener of the process entry.
import { createHash, timingSafeEqual } from 'node:crypto';
import cors from '@fastify/cors';
import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import fp from 'fastify-plugin';
import { bearerToken } from '../../core/auth/platform-token.ts';
import {
  createMetricsRegistry,
  METRICS_CONTENT_TYPE,
  registerApiMetrics,
  registerDatabaseMetrics,
  renderMetrics,
  type Registry,
} from '../../core/metrics.ts';
import { queueMetricsOptions } from '../../core/queue-metrics.ts';

export type AppMetrics = {
  /** This app's registry: process entries serve it on METRICS_PORT too. */
  registry: Registry;
  /** The websocket routes say how many sockets are open. */
  countWebsockets: (count: () => number) => void;
  /** Counts an answer in the request metrics and logs its line (onResponse does both for every answer Fastify sends). */
  observeResponse: (reply: FastifyReply, status: number) => void;
};

declare module 'fastify' {
  interface FastifyInstance {
    metrics: AppMetrics;
  }
}

export const CORS_METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'];
export const CORS_ALLOWED_HEADERS = [
  'authorization',
  'content-type',
  'x-tenant-id',
  'idempotency-key',
  'mcp-protocol-version',
  'x-request-id',
];
export const CORS_EXPOSED_HEADERS = ['x-request-id', 'retry-after'];

const sha256 = (value: string) => createHash('sha256').update(value).digest();

/** Probes and scrapes come every few seconds: at debug, so an idle platform logs nothing on a schedule. */
const ROUTINE = new Set(['/healthz', '/readyz', '/metrics']);

/**
 * The request's one line: method, route pattern (never the raw URL: it may
 * carry ids people did not mean to log), status, the error code of a refused
 * request, duration, tenant; the request id is on every line of the request
 * (Fastify's reqId). A request no route matched logs its path instead, without
 * the query string (what was asked for is the point there).
 */
function logRequest(request: FastifyRequest, route: string, status: number, elapsedMs: number): void {
  const level = ROUTINE.has(route) ? 'debug' : 'info';
  if (!(request.log as { isLevelEnabled?: (level: string) => boolean }).isLevelEnabled?.(level)) return;
  const ms = Math.round(elapsedMs * 10) / 10;
  const error = request.errorCode ?? undefined;
  const path = request.routeOptions.url === undefined ? request.url.split('?')[0]!.slice(0, 200) : undefined;
  const shown = path === undefined ? route : `${route} ${path}`;
  request.log[level](
    {
      method: request.method,
      route,
      ...(path === undefined ? {} : { path }),
      status,
      ...(error ? { error } : {}),
      ms,
      ...(request.tenant ? { tenant: request.tenant.id } : {}),
    },
    `${request.method} ${shown} ${status}${error ? ` ${error}` : ''} ${ms} ms`,
  );
}

async function operations(app: FastifyInstance) {
  const allowed = new Set(app.config.corsOrigins);
  if (allowed.size > 0) {
    await app.register(cors, {
      // Exactly the listed origins; any other gets no CORS headers (and its
      // preflight a 404), as if CORS were off.
      origin: (origin, cb) => cb(null, origin !== undefined && allowed.has(origin) ? origin : false),
      credentials: false,
      methods: CORS_METHODS,
      allowedHeaders: CORS_ALLOWED_HEADERS,
      exposedHeaders: CORS_EXPOSED_HEADERS,
      maxAge: 600,
      strictPreflight: true,
    });
  }

  const registry = createMetricsRegistry();
  let websockets: () => number = () => 0;
  const { httpDuration } = registerApiMetrics(registry, {
    websocketConnections: () => websockets(),
    listenConnected: () => app.jobEvents.connected,
  });
  registerDatabaseMetrics(
    registry,
    app.db,
    app.log.child({ component: 'metrics' }),
    queueMetricsOptions(app.config.worker),
  );
  app.decorate('metrics', {
    registry,
    countWebsockets: (count: () => number) => {
      websockets = count;
    },
    observeResponse,
  } satisfies AppMetrics);

  function observeResponse(reply: FastifyReply, status: number): void {
    const { request } = reply;
    // The route pattern, never the raw URL (ids would explode the label set).
    const route = request.routeOptions.url ?? 'unmatched';
    httpDuration.observe({ method: request.method, route, status_code: String(status) }, reply.elapsedTime / 1000);
    logRequest(request, route, status, reply.elapsedTime);
  }

  // A callback, not async: every request runs it (see the onSend hook in app.ts).
  app.addHook('onResponse', (_request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => {
    observeResponse(reply, reply.statusCode);
    done();
  });

  const token = app.config.metrics.token;
  if (token === undefined) {
    // Off on this port: a 404 that says how to turn it on (no figure is served).
    const where = app.config.metrics.port
      ? `This deployment serves them on their own listener (METRICS_PORT=${app.config.metrics.port}, METRICS_HOST).`
      : 'Set METRICS_TOKEN (16+ characters) to serve GET /metrics here for `Authorization: Bearer <METRICS_TOKEN>`, or METRICS_PORT for a listener of their own.';
    app.get('/metrics', { schema: { hide: true } }, async (_request, reply) =>
      reply
        .code(404)
        .send({ error: 'not_found', status: 404, message: `Metrics are not served on this port. ${where}` }),
    );
    return;
  }
  const expected = sha256(token);
  app.get('/metrics', { schema: { hide: true } }, async (request, reply) => {
    const given = bearerToken(request.headers.authorization);
    // Both sides hashed: equal lengths for timingSafeEqual, no length leak.
    if (!given || !timingSafeEqual(sha256(given), expected)) {
      return reply.code(401).header('www-authenticate', 'Bearer realm="metrics"').send({
        error: 'unauthorized',
        status: 401,
        message: 'GET /metrics needs `Authorization: Bearer <METRICS_TOKEN>`.',
      });
    }
    return reply.type(METRICS_CONTENT_TYPE).send(await renderMetrics([registry]));
  });
}

export default fp(operations, { name: 'operations', dependencies: ['context'] });
