// GET /healthz: the process is alive. GET /readyz: it can serve traffic (the
// database answers, its schema is current, it is not shutting down).
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { migrationState } from '../../../core/db/migrate.ts';

const Health = z.object({ status: z.literal('ok') }).meta({ id: 'Health' });
const Readiness = z
  .object({
    status: z.enum(['ready', 'not_ready']),
    checks: z.object({
      database: z.enum(['ok', 'unreachable']),
      migrations: z.enum(['current', 'pending', 'unknown']),
      jobEvents: z.enum(['listening', 'reconnecting']),
      shuttingDown: z.boolean(),
    }),
    pendingMigrations: z.array(z.string()).optional(),
  })
  .meta({ id: 'Readiness' });

export type Readiness = z.infer<typeof Readiness>;

/** What GET /readyz answers (also shown on the landing page). */
export async function readiness(app: FastifyInstance, log: FastifyBaseLogger): Promise<Readiness> {
  let database: 'ok' | 'unreachable' = 'ok';
  let migrations: 'current' | 'pending' | 'unknown' = 'unknown';
  let pending: string[] | undefined;
  try {
    const state = await migrationState(app.db);
    migrations = state.current ? 'current' : 'pending';
    if (!state.current) pending = state.pending;
  } catch (error) {
    log.warn({ err: error }, 'readiness: database check failed');
    database = 'unreachable';
  }
  const jobEvents = app.jobEvents.connected ? ('listening' as const) : ('reconnecting' as const);
  const ready = database === 'ok' && migrations === 'current' && jobEvents === 'listening' && !app.shuttingDown;
  return {
    status: ready ? 'ready' : 'not_ready',
    checks: { database, migrations, jobEvents, shuttingDown: app.shuttingDown },
    ...(pending ? { pendingMigrations: pending } : {}),
  };
}

const healthRoutes: FastifyPluginAsyncZod = async (app) => {
  app.get(
    '/healthz',
    {
      schema: {
        operationId: 'getHealth',
        security: [],
        tags: ['operations'],
        summary: 'Process liveness',
        response: { 200: Health },
      },
    },
    async () => ({ status: 'ok' as const }),
  );

  app.get(
    '/readyz',
    {
      schema: {
        operationId: 'getReadiness',
        security: [],
        tags: ['operations'],
        summary: 'Readiness: database reachable, migrations current',
        response: { 200: Readiness, 503: Readiness },
      },
    },
    async (_request, reply) => {
      const body = await readiness(app, reply.log);
      return reply.code(body.status === 'ready' ? 200 : 503).send(body);
    },
  );
};

export default healthRoutes;
