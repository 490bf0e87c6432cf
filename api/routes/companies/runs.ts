// Starting a run of a task by one of the company's agents: answered 202 at
// once, the run itself executes as a job on a worker.
import { z } from 'zod';
import { startCompanyRun } from '../../../core/companies/runs.ts';
import { findJobInTenant } from '../../../core/jobs/read.ts';
import { toJobStatus } from '../../../core/jobs/schema.ts';
import { PlatformError } from '../../errors.ts';
import { type CompanyApp, CompanyParams, type CompanyRouteContext, mapped } from './context.ts';
import { RunAccepted, toRun } from './schemas.ts';

export function registerCompanyRunRoutes(app: CompanyApp, { member, errors, doc }: CompanyRouteContext): void {
  app.post(
    '/api/companies/:companyId/tasks/:taskId/runs',
    {
      ...member,
      schema: {
        ...doc(
          'startCompanyRun',
          "Run a task by one of the company's agents",
          "Tenant Member or Admin. Answers 202 at once with the run and its job; the agent's model works on a worker. Follow the job at GET /api/jobs/:jobId (or /api/ws); the run's status mirrors it and its output is set once it succeeds. 409 when the agent is paused or the task is done or cancelled; 429 QUEUE_LIMIT_REACHED when the account has as many unfinished jobs as its plan allows.",
        ),
        params: CompanyParams.extend({ taskId: z.uuid() }),
        body: z.object({ agentId: z.uuid().describe('An active agent of this company') }),
        response: { 202: RunAccepted, ...errors, 409: PlatformError, 429: PlatformError },
      },
    },
    async (request, reply) =>
      mapped(async () => {
        const tenantId = request.tenant!.id;
        const { run, job } = await startCompanyRun(app.db, {
          tenantId,
          companyId: request.params.companyId,
          taskId: request.params.taskId,
          agentId: request.body.agentId,
        });
        // Read after commit: a fast worker may already have moved it on.
        const row = await findJobInTenant(app.db, job.id, tenantId);
        if (!row) throw new Error('the job of a run just started is missing');
        return reply
          .code(202)
          .header('location', `/api/jobs/${job.id}`)
          .send({ run: toRun(run), job: toJobStatus(row) });
      }),
  );
}
