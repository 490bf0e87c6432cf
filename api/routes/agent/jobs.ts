// GET /api/agent/v1/jobs/{jobId} (extension): an agent follows the work it
// started through the Agent API (today: the restore job a restore returns)
// with its own token. Only job kinds the Agent API starts are visible, and
// only in the caller's workspace: a chat turn or any other job of the
// workspace reads as not found, so an agent never sees people's chat content.
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { findJobInTenant } from '../../../core/jobs/read.ts';
import { JobStatus, toJobStatus } from '../../../core/jobs/schema.ts';
import { AGENT_RESTORE_KIND } from '../../../core/managed-agents/managed-agents.ts';
import { AgentApiError, AgentHttpError, SharedRateLimitError } from '../../errors.ts';
import { defineOperation, registerHttpOperation } from './operation.ts';

/** Job kinds an agent starts through the Agent API. */
const AGENT_JOB_KINDS: ReadonlySet<string> = new Set([AGENT_RESTORE_KIND]);

export const jobOperations = [
  defineOperation({
    operationId: 'getAgentJob',
    method: 'GET',
    role: 'viewer',
    path: '/api/agent/v1/jobs/:jobId',
    summary: 'Extension: status of a job the Agent API started (e.g. a restore)',
    description: 'Poll until `status` is succeeded, failed or cancelled; `version` increases with every change.',
    params: z.object({ jobId: z.uuid().describe('restore_job.id from the restore response') }),
    response: JobStatus,
    errors: {
      400: AgentApiError,
      401: AgentApiError,
      403: AgentApiError,
      404: AgentApiError,
      429: SharedRateLimitError,
      503: AgentApiError,
    },
    mcp: { title: 'Get a job started through the Agent API', readOnly: true },
    run: async (app, caller, { params }) => {
      const job = await findJobInTenant(app.db, params.jobId, caller.agent.tenantId);
      if (!job || !AGENT_JOB_KINDS.has(job.kind)) {
        throw new AgentHttpError(
          404,
          'not_found',
          'No job with this id was started through the Agent API in this workspace.',
          'reread_list',
        );
      }
      return toJobStatus(job);
    },
  }),
];

const agentJobRoutes: FastifyPluginAsyncZod = async (app) => {
  for (const op of jobOperations) registerHttpOperation(app, op);
};

export default agentJobRoutes;
