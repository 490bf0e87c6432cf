// POST /api/agent/v1/agents/{agentRef}/restore (restoreAgent, rule 6).
// Order of checks: the agent in the caller's tenant (404), the claim rule for
// unclaimed trials (403 claim_required), authority tombstones (409), then
// readiness. Readiness refusals are thrown with recordIdempotency=false so the
// identical retry runs once the runner or gateway is ready; every other
// outcome is recorded under the Idempotency-Key.
//
// Statuses chosen where the spec shows none:
//   setup_required (runner_not_enrolled)            409, next_action complete_setup
//   temporarily_disabled (run_execution_disabled,
//     runner_offline, cloud_gateway_not_connected)  503, next_action retry_later
//   deleted authority tombstone                     409 tombstone_not_restorable
// The reason is named in the message and in details [{path: 'reason', message: <reason>}].
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import {
  findManagedAgent,
  latestRestoreJob,
  restoreManagedAgent,
  type ManagedAgentRow,
  type RestoreJob,
} from '../../../core/managed-agents/managed-agents.ts';
import { readiness, type NotReadyReason } from '../../../core/runners/runners.ts';
import { AgentApiError, AgentHttpError, SharedRateLimitError } from '../../errors.ts';
import { AgentRefParams, ManagedAgentResponse, RestoreAgentRequest } from './managed-agents.schemas.ts';
import { defineOperation, registerHttpOperation } from './operation.ts';

type Reason = NotReadyReason;

const REFUSALS: Record<
  Reason,
  { status: number; code: string; message: string; next: 'complete_setup' | 'retry_later' }
> = {
  runner_not_enrolled: {
    status: 409,
    code: 'setup_required',
    next: 'complete_setup',
    message:
      'runner_not_enrolled: no runner is enrolled in this workspace; a tenant Admin must enroll one, then retry the same request.',
  },
  run_execution_disabled: {
    status: 503,
    code: 'temporarily_disabled',
    next: 'retry_later',
    message:
      'run_execution_disabled: run execution is switched off for this workspace; retry the same request once it is switched on.',
  },
  runner_offline: {
    status: 503,
    code: 'temporarily_disabled',
    next: 'retry_later',
    message:
      'runner_offline: the runner has not sent a heartbeat recently; retry the same request once it is back online.',
  },
  cloud_gateway_not_connected: {
    status: 503,
    code: 'temporarily_disabled',
    next: 'retry_later',
    message:
      'cloud_gateway_not_connected: the runner is not connected to the cloud gateway; retry the same request once it is.',
  },
};

/** A readiness refusal: not recorded, and rendered with its reason in details. */
export class ReadinessRefusal extends AgentHttpError {
  constructor(public readonly reason: Reason) {
    const r = REFUSALS[reason];
    super(r.status, r.code, r.message, r.next, {}, false, [{ path: 'reason', message: reason }]);
  }
}

const toResponse = (agent: ManagedAgentRow, job: RestoreJob | null) => ({
  id: agent.id,
  name: agent.name,
  kind: agent.kind,
  status: 'active' as const,
  restored_at: agent.restored_at,
  restore_job: job,
});

export const managedAgentOperations = [
  defineOperation({
    operationId: 'restoreAgent',
    method: 'POST',
    path: '/api/agent/v1/agents/:agentRef/restore',
    scope: 'svc:agents:write',
    // It brings back what an Admin deleted: only Admins create and delete managed agents.
    role: 'admin',
    summary: 'Restore a deleted managed agent; refused before it starts when the runner or gateway is not ready',
    description:
      'Returns the active managed agent. A readiness refusal (409 setup_required, 503 temporarily_disabled, the reason in details) is not recorded under the Idempotency-Key, so the identical retry runs once the runner or gateway is ready.',
    params: AgentRefParams,
    body: RestoreAgentRequest,
    response: ManagedAgentResponse,
    errors: {
      400: AgentApiError,
      401: AgentApiError,
      403: AgentApiError,
      404: AgentApiError,
      409: AgentApiError,
      429: SharedRateLimitError,
      503: AgentApiError,
    },
    mcp: { title: 'Restore a managed agent', readOnly: false },
    run: async (_app, { agent: caller, log }, { params, body }, db) => {
      const agent = await findManagedAgent(db, caller.tenantId, params.agentRef);
      if (!agent)
        throw new AgentHttpError(
          404,
          'not_found',
          'No such managed agent in this workspace; re-read your agents.',
          'reread_list',
        );
      const ownStandalone = agent.kind === 'standalone' && agent.created_by_principal === caller.principalId;
      if (caller.claimState !== 'claimed' && !ownStandalone) {
        throw new AgentHttpError(
          403,
          'claim_required',
          'An unclaimed agent may restore only the standalone agents it created; claim the account first.',
          'claim_account',
        );
      }
      if (agent.kind === 'authority' && agent.status === 'deleted') {
        throw new AgentHttpError(
          409,
          'tombstone_not_restorable',
          'A deleted authority agent is a tombstone and is never restored; create a new agent instead.',
          'contact_support',
        );
      }
      // Already active: nothing to start, so readiness does not matter.
      if (agent.status === 'active') return toResponse(agent, await latestRestoreJob(db, agent.id));
      const ready = await readiness(db, caller.tenantId, agent.runner_id);
      if (!ready.ready) throw new ReadinessRefusal(ready.reason);
      const restored = await restoreManagedAgent(db, agent, ready.runnerId);
      log.info({ managedAgentId: agent.id, jobId: restored.job?.id, reason: body?.reason }, 'managed agent restored');
      return toResponse(restored.agent, restored.job);
    },
  }),
];

const managedAgentRoutes: FastifyPluginAsyncZod = async (app) => {
  for (const op of managedAgentOperations) registerHttpOperation(app, op);
};

export default managedAgentRoutes;
