// GET /api/agent/v1/me and /api/agent/v1/capabilities: who the calling agent
// is, and what it may do now (with the safe next actions where it may not).
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { capabilitiesOf, liveState } from '../../../core/agent/capabilities.ts';
import { AGENT_SCOPES } from '../../../core/identity/tokens.ts';
import { TenantRoleSchema } from '../../../core/tenants/roles.ts';
import { AgentApiError, SharedRateLimitError } from '../../errors.ts';
import { approvalPageUrl } from '../boards/approval-page.ts';
import { accessOf, defineOperation, registerHttpOperation, type Caller } from './operation.ts';

const ClaimState = z.enum(['unclaimed', 'pending', 'claimed']);
const WORKSPACE =
  'Where the agent acts (plan, companies, boards): the organization the person chose when claiming it, else its own workspace';
const OWN_WORKSPACE = 'The workspace made at registration; kept as it is when claimed (never merged)';
const Me = z
  .object({
    principal: z.object({ id: z.uuid(), name: z.string() }),
    registration: z.object({ id: z.uuid(), type: z.enum(['anonymous', 'service_auth']), claim_state: ClaimState }),
    workspace: z.object({ id: z.uuid(), name: z.string(), plan: z.string() }).describe(WORKSPACE),
    own_workspace: z.object({ id: z.uuid(), name: z.string() }).describe(OWN_WORKSPACE),
    scopes: z.array(z.enum(AGENT_SCOPES)),
    token_expires_at: z.iso.datetime(),
  })
  .meta({ id: 'AgentMeResponse' });

const NextAction = z.object({
  action: z.enum([
    'claim_account',
    'change_plan',
    'refresh_registration',
    'complete_setup',
    'await_approval',
    'raise_claimer_role',
  ]),
  actor: z
    .enum(['agent', 'person'])
    .describe('agent: call the endpoint; person: hand the URL to the user (it carries no credential)'),
  reason: z.string(),
  method: z.enum(['POST', 'PUT', 'PATCH']).optional(),
  endpoint: z.url().optional(),
  url: z.url().optional(),
});
const SetupStep = z.enum([
  'runner_not_enrolled',
  'run_execution_disabled',
  'runner_offline',
  'cloud_gateway_not_connected',
]);
const PendingApproval = z.object({
  id: z.uuid(),
  board_id: z.uuid(),
  version: z.int(),
  visibility: z.enum(['private', 'public']),
  created_at: z.iso.datetime({ offset: true }),
  requested_by_you: z.boolean(),
  approve_url: z.url().describe('The page a tenant Admin opens to decide (no credential in it)'),
});
const Capabilities = z
  .object({
    identity: z.object({
      principal_id: z.uuid(),
      principal_name: z.string(),
      registration_id: z.uuid(),
      registration_type: z.enum(['anonymous', 'service_auth']),
      workspace: z.object({ id: z.uuid(), name: z.string() }).describe(WORKSPACE),
      own_workspace: z.object({ id: z.uuid(), name: z.string() }).describe(OWN_WORKSPACE),
    }),
    claim: z.object({ state: ClaimState, claimed_at: z.iso.datetime().nullable(), required_for: z.array(z.string()) }),
    scopes: z.object({
      granted: z.array(z.enum(AGENT_SCOPES)),
      after_claim: z.array(z.enum(AGENT_SCOPES)),
      all: z.array(z.enum(AGENT_SCOPES)),
    }),
    token: z.object({ expires_at: z.iso.datetime() }),
    access: z
      .object({
        claimer_role: TenantRoleSchema.nullable().describe(
          'The current role in the workspace of the person who claimed the agent; null before a claim (no person: the scopes decide)',
        ),
        allowed: z.array(z.string()).describe('Operations (operationIds, also the MCP tool names) the role allows'),
        refused: z
          .array(z.object({ operation: z.string(), needs: TenantRoleSchema }))
          .describe('Operations refused with 403 insufficient_role, and the claimer role each needs'),
      })
      .describe(
        "What the agent may do given its claimer's role, read at each request: a Viewer's agent reads, a Member's also changes boards, an Admin's also restores managed agents",
      ),
    plan: z.object({ name: z.string(), company_work: z.boolean() }),
    quota: z.object({ period: z.literal('month'), messages_limit: z.int() }),
    models: z.object({ allowed: z.array(z.string()), default: z.string() }),
    setup: z
      .object({
        complete: z.boolean().describe('Restore can start now: every step below is done'),
        pending_steps: z.array(SetupStep).describe('What is missing, in the order a person fixes it'),
        runner_enrolled: z.boolean(),
        run_execution_enabled: z.boolean(),
        runner_online: z.boolean().describe('The most ready runner sent a heartbeat in the last 60 s'),
        gateway_connected: z.boolean().describe('That runner reports a connected cloud gateway'),
        restore: z
          .object({ ready: z.boolean(), reason: SetupStep.nullable() })
          .describe('What restoreAgent answers now: ready, or the reason it refuses'),
      })
      .describe('Managed-agent restore readiness, decided exactly as restoreAgent decides it'),
    approvals: z
      .object({
        pending: z.array(z.uuid()).describe("Ids of the workspace's pending publish approvals (oldest first)"),
        items: z.array(PendingApproval),
        listed_max: z.int().describe('At most this many are listed'),
      })
      .describe(
        'Publish requests waiting for a tenant Admin; the identical publish request answers approval_required while one is pending',
      ),
    next_actions: z.array(NextAction),
  })
  .meta({ id: 'AgentCapabilitiesResponse' });

const errors = { 401: AgentApiError, 403: AgentApiError, 429: SharedRateLimitError, 503: AgentApiError };

const meOf = ({ agent, context: ctx }: Caller) => ({
  principal: { id: ctx.principal_id, name: ctx.principal_name },
  registration: { id: ctx.registration_id, type: ctx.registration_type, claim_state: ctx.claim_state },
  workspace: { id: ctx.tenant_id, name: ctx.tenant_name, plan: ctx.plan },
  own_workspace: { id: ctx.own_tenant_id, name: ctx.own_tenant_name },
  scopes: agent.scopes,
  token_expires_at: new Date(agent.expiresAt * 1000).toISOString(),
});

export const identityOperations = [
  defineOperation({
    operationId: 'getAgentMe',
    method: 'GET',
    role: 'viewer',
    path: '/api/agent/v1/me',
    summary: 'The calling agent',
    response: Me,
    errors,
    mcp: { title: 'Who am I', readOnly: true },
    run: async (_app, caller) => meOf(caller),
  }),
  defineOperation({
    operationId: 'getAgentCapabilities',
    method: 'GET',
    role: 'viewer',
    path: '/api/agent/v1/capabilities',
    summary: 'Identity, claim state, plan, quota, models, setup and approval state, and the safe next actions',
    description: 'The authority for what the caller may do now; read it first and follow `next_actions`.',
    response: Capabilities,
    errors,
    mcp: { title: 'Capabilities and next actions', readOnly: true },
    run: async (app, { agent, context }) => {
      const urls = { ...app.config, approveUrl: (id: string) => approvalPageUrl(app.config.baseUrl, id) };
      return capabilitiesOf(context, agent, urls, await liveState(app.db, context.tenant_id), accessOf(agent.role));
    },
  }),
];

const agentIdentityRoutes: FastifyPluginAsyncZod = async (app) => {
  for (const op of identityOperations) registerHttpOperation(app, op);
};

export default agentIdentityRoutes;
