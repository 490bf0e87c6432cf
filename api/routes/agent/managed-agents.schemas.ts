// Schemas of the managed-agent operations of the Agent API.
import { z } from 'zod';
import { JOB_STATUSES } from '../../../core/jobs/schema.ts';

export const AgentRefParams = z.object({
  agentRef: z.string().min(1).max(256).describe('The managed agent id (1-256 characters; ids are UUIDs)'),
});

export const RestoreAgentRequest = z
  .object({
    reason: z.string().trim().min(1).max(500).optional().describe('Why the agent is restored, for the audit trail'),
  })
  .strict()
  .meta({ id: 'restoreAgent.request.v1', description: 'Restore request; an empty object is valid' });

export const RestoreJob = z
  .object({
    id: z.uuid().describe('Poll GET /api/agent/v1/jobs/{id} (MCP tool getAgentJob) until it is finished'),
    status: z.enum(JOB_STATUSES),
  })
  .describe('The job that hands the agent to its runner');

export const ManagedAgentResponse = z
  .object({
    id: z.uuid(),
    name: z.string(),
    kind: z.enum(['standalone', 'authority']),
    status: z.literal('active'),
    restored_at: z.iso.datetime().nullable(),
    restore_job: RestoreJob.nullable().describe('Null when the agent was already active and was never restored'),
  })
  .meta({ id: 'ManagedAgentResponse', description: 'The active managed agent' });
