// GET /api/jobs/:jobId: the state of any job of a tenant the caller belongs to.
// (Extension of the spec; the per-area routes such as /api/chat/jobs/:jobId
// return the same JobStatus.) Another tenant's job is a plain 404.
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { findJobForUser } from '../../../core/jobs/read.ts';
import { JobStatus, toJobStatus } from '../../../core/jobs/schema.ts';
import { PlatformError, PlatformHttpError } from '../../errors.ts';

const jobRoutes: FastifyPluginAsyncZod = async (app) => {
  app.get(
    '/api/jobs/:jobId',
    {
      preHandler: app.requireUser,
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
};

export default jobRoutes;
