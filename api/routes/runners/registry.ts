// The tenant's runners for people: members (Viewer and up) list and read
// them, Admins revoke them. Registered by ./index.ts. Tokens and their hashes
// are never part of a response.
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { PageQuery } from '../../../core/paging.ts';
import {
  findRunner,
  listRunners,
  revokeRunner,
  RUNNER_STATUSES,
  type RunnerRow,
} from '../../../core/runners/registry.ts';
import { RUNNER_OFFLINE_AFTER_S } from '../../../core/runners/runners.ts';
import { pageOr400, PlatformError, PlatformHttpError } from '../../errors.ts';
import { TenantHeaders } from '../../plugins/tenant.ts';

const Runner = z
  .object({
    id: z.uuid(),
    name: z.string(),
    status: z.enum(RUNNER_STATUSES),
    enrolledAt: z.iso.datetime(),
    lastHeartbeatAt: z.iso.datetime().nullable(),
    online: z
      .boolean()
      .describe(
        `Active and sent a heartbeat within the last ${RUNNER_OFFLINE_AFTER_S} s (as restore readiness counts it)`,
      ),
    gatewayConnected: z
      .boolean()
      .describe('Whether the runner reported a cloud gateway connection on its last heartbeat'),
    revokedAt: z.iso.datetime().nullable(),
  })
  .meta({ id: 'Runner' });
const RunnerPage = z.object({ items: z.array(Runner), nextCursor: z.string().nullable() }).meta({ id: 'RunnerPage' });
const RunnerParams = z.object({ runnerId: z.uuid() });

const toRunner = (r: RunnerRow) => ({
  id: r.id,
  name: r.name,
  status: r.status,
  enrolledAt: r.enrolled_at,
  lastHeartbeatAt: r.last_heartbeat_at,
  online: r.online,
  gatewayConnected: r.gateway_connected,
  revokedAt: r.revoked_at,
});
const notFound = () => new PlatformHttpError(404, 'not_found', 'No such runner.');

const runnerRegistryRoutes: FastifyPluginAsyncZod = async (app) => {
  const security = [{ PlatformJWT: [] }];
  const tags = ['runners'];
  const viewer = { onRequest: app.requireUser, preValidation: app.requireTenant('viewer') };
  const admin = { onRequest: app.requireUser, preValidation: app.requireTenant('admin') };
  const errors = { 400: PlatformError, 401: PlatformError, 403: PlatformError, 404: PlatformError };

  app.get(
    '/api/runners',
    {
      ...viewer,
      schema: {
        operationId: 'listRunners',
        tags,
        summary: 'Runners of the tenant, newest enrolment first',
        security,
        headers: TenantHeaders,
        description:
          'Keyset pages: pass nextCursor as cursor; runners enrolled while paging never repeat or shift what was seen.',
        querystring: PageQuery.extend({
          status: z.enum(RUNNER_STATUSES).optional().describe('Only runners in this status'),
        }),
        response: { 200: RunnerPage, ...errors },
      },
    },
    async (request) => {
      const page = await pageOr400(() => listRunners(app.db, request.tenant!.id, request.query));
      return { items: page.items.map(toRunner), nextCursor: page.nextCursor };
    },
  );

  app.get(
    '/api/runners/:runnerId',
    {
      ...viewer,
      schema: {
        operationId: 'getRunner',
        tags,
        summary: 'One runner of the tenant',
        security,
        headers: TenantHeaders,
        description: "Another tenant's runner is a plain 404.",
        params: RunnerParams,
        response: { 200: Runner, ...errors },
      },
    },
    async (request) =>
      toRunner(
        (await findRunner(app.db, request.tenant!.id, request.params.runnerId)) ?? (await Promise.reject(notFound())),
      ),
  );

  app.delete(
    '/api/runners/:runnerId',
    {
      ...admin,
      schema: {
        operationId: 'revokeRunner',
        tags,
        summary: 'Revoke a runner (repeatable)',
        security,
        headers: TenantHeaders,
        description:
          'Tenant Admin. The runner token stops authenticating at once and restore readiness no longer considers the runner; ' +
          'work it had not acknowledged stays unacknowledged, so its restore jobs fail once they time out. Revoking again returns the same runner.',
        params: RunnerParams,
        response: { 200: Runner, ...errors },
      },
    },
    async (request) => {
      const runner = await revokeRunner(app.db, request.tenant!.id, request.params.runnerId);
      if (!runner) throw notFound();
      request.log.info({ runnerId: runner.id, tenantId: request.tenant!.id }, 'runner revoked');
      return toRunner(runner);
    },
  );
};

export default runnerRegistryRoutes;
