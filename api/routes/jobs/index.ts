// GET /api/jobs/:jobId: the state of any job of a tenant the caller belongs to.
// POST /api/jobs/:jobId/cancel: a tenant Admin cancels a job: at once when it
// has not started, through its worker ('cancelling', then 'cancelled') when it runs.
// (Extension of the spec; the per-area routes such as /api/chat/jobs/:jobId
// return the same JobStatus.) Another tenant's job is a plain 404.
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { requestCancel } from '../../../core/jobs/lifecycle.ts';
import { findJobForUser, findJobWithRole } from '../../../core/jobs/read.ts';
import { JobStatus, toJobStatus } from '../../../core/jobs/schema.ts';
import { roleAtLeast, roleNeeded, type TenantRole } from '../../../core/tenants/roles.ts';
import { PlatformError, PlatformHttpError } from '../../errors.ts';

/** Cancelling a job: the people who start work in the tenant. */
const CANCEL_ROLE: TenantRole = 'member';

const jobRoutes: FastifyPluginAsyncZod = async (app) => {
  app.get(
    '/api/jobs/:jobId',
    {
      onRequest: app.requireUser,
      schema: {
        operationId: 'getJob',
        tags: ['jobs'],
        summary: 'Status, progress and result of an asynchronous job',
        security: [{ PlatformJWT: [] }],
        params: z.object({ jobId: z.uuid().describe('Job id returned when the work was accepted') }),
        response: { 200: JobStatus, 400: PlatformError, 401: PlatformError, 404: PlatformError },
      },
    },
    async (request) => {
      const row = await findJobForUser(app.db, request.params.jobId, request.user!.userId);
      if (!row) throw new PlatformHttpError(404, 'not_found', 'No such job.');
      return toJobStatus(row);
    },
  );

  app.post(
    '/api/jobs/:jobId/cancel',
    {
      onRequest: app.requireUser,
      schema: {
        operationId: 'cancelJob',
        tags: ['jobs'],
        summary: 'Cancel a job (tenant Member or Admin)',
        description:
          'A queued job is cancelled at once (status `cancelled`). A running job becomes `cancelling`: the worker holding it ' +
          'aborts its work and ends it as `cancelled` (within JOB_CANCEL_GRACE_MS even if the work ignores the request); ' +
          'follow it by polling or over the websocket. No result is recorded for a cancelled job. ' +
          'A job that already finished, or is already cancelling, is left as it is (409).',
        security: [{ PlatformJWT: [] }],
        // The job names its tenant, so the role is checked by the handler; declared here for the roles matrix.
        'x-tenant-role': CANCEL_ROLE,
        params: z.object({ jobId: z.uuid() }),
        response: {
          200: JobStatus,
          400: PlatformError,
          401: PlatformError,
          403: PlatformError,
          404: PlatformError,
          409: PlatformError,
        },
      },
    },
    async (request) => {
      const found = await findJobWithRole(app.db, request.params.jobId, request.user!.userId);
      if (!found) throw new PlatformHttpError(404, 'not_found', 'No such job.');
      if (!roleAtLeast(found.role, CANCEL_ROLE)) throw new PlatformHttpError(403, 'forbidden', roleNeeded(CANCEL_ROLE));
      const cancelled = await requestCancel(app.db, found.job.id);
      if (cancelled) return toJobStatus(cancelled);
      const current = await findJobForUser(app.db, found.job.id, request.user!.userId);
      throw new PlatformHttpError(
        409,
        'job_not_cancellable',
        `The job is ${current?.status ?? found.job.status}; only a queued or running job can be cancelled.`,
      );
    },
  );
};

export default jobRoutes;
