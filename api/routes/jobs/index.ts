// GET /api/jobs/:jobId: the state of any job of a tenant the caller belongs to.
// POST /api/jobs/:jobId/cancel: a tenant Admin cancels a job not yet started.
// (Extension of the spec; the per-area routes such as /api/chat/jobs/:jobId
// return the same JobStatus.) Another tenant's job is a plain 404.
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { cancelQueuedJob } from '../../../core/jobs/lifecycle.ts';
import { findJobForUser, findJobWithRole } from '../../../core/jobs/read.ts';
import { JobStatus, toJobStatus } from '../../../core/jobs/schema.ts';
import { PlatformError, PlatformHttpError } from '../../errors.ts';

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
        summary: 'Cancel a job that has not started yet (tenant Admin)',
        description: 'A running job cannot be cancelled; a finished one is left as it is (409 either way).',
        security: [{ PlatformJWT: [] }],
        params: z.object({ jobId: z.uuid() }),
        response: { 200: JobStatus, 400: PlatformError, 401: PlatformError, 403: PlatformError, 404: PlatformError, 409: PlatformError },
      },
    },
    async (request) => {
      const found = await findJobWithRole(app.db, request.params.jobId, request.user!.userId);
      if (!found) throw new PlatformHttpError(404, 'not_found', 'No such job.');
      if (found.role !== 'admin') throw new PlatformHttpError(403, 'forbidden', 'Only a tenant Admin can cancel jobs.');
      const cancelled = await cancelQueuedJob(app.db, found.job.id);
      if (cancelled) return toJobStatus(cancelled);
      const current = await findJobForUser(app.db, found.job.id, request.user!.userId);
      throw new PlatformHttpError(409, 'job_not_queued', `The job is ${current?.status ?? found.job.status}; only a queued job can be cancelled.`);
    },
  );
};

export default jobRoutes;
