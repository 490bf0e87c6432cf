// GET /api/agent/v1/me and /api/agent/v1/capabilities: who the calling agent
// is, and what it may do now (with the safe next actions where it may not).
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { capabilitiesOf } from '../../../core/agent/capabilities.ts';
import { AGENT_SCOPES } from '../../../core/identity/tokens.ts';
import { AgentApiError, SharedRateLimitError } from '../../errors.ts';
import { defineOperation, registerHttpOperation, type Caller } from './operation.ts';

const ClaimState = z.enum(['unclaimed', 'pending', 'claimed']);
const Me = z
  .object({
    principal: z.object({ id: z.uuid(), name: z.string() }),
    registration: z.object({ id: z.uuid(), type: z.enum(['anonymous', 'service_auth']), claim_state: ClaimState }),
    workspace: z.object({ id: z.uuid(), name: z.string(), plan: z.string() }),
    scopes: z.array(z.enum(AGENT_SCOPES)),
    token_expires_at: z.iso.datetime(),
  })
  .meta({ id: 'AgentMeResponse' });

const NextAction = z.object({
  action: z.enum(['claim_account', 'change_plan', 'refresh_registration']),
  actor: z.enum(['agent', 'person']).describe('agent: call the endpoint; person: hand the URL to the user (it carries no credential)'),
  reason: z.string(),
  method: z.literal('POST').optional(),
  endpoint: z.url().optional(),
  url: z.url().optional(),
});
const Capabilities = z
  .object({
    identity: z.object({
      principal_id: z.uuid(),
      principal_name: z.string(),
      registration_id: z.uuid(),
      registration_type: z.enum(['anonymous', 'service_auth']),
      workspace: z.object({ id: z.uuid(), name: z.string() }),
    }),
    claim: z.object({ state: ClaimState, claimed_at: z.iso.datetime().nullable(), required_for: z.array(z.string()) }),
    scopes: z.object({ granted: z.array(z.enum(AGENT_SCOPES)), after_claim: z.array(z.enum(AGENT_SCOPES)), all: z.array(z.enum(AGENT_SCOPES)) }),
    token: z.object({ expires_at: z.iso.datetime() }),
    plan: z.object({ name: z.string(), company_work: z.boolean() }),
    quota: z.object({ period: z.literal('month'), messages_limit: z.int() }),
    models: z.object({ allowed: z.array(z.string()), default: z.string() }),
    setup: z.object({ complete: z.boolean(), pending_steps: z.array(z.string()) }),
    approvals: z.object({ pending: z.array(z.string()) }),
    next_actions: z.array(NextAction),
  })
  .meta({ id: 'AgentCapabilitiesResponse' });

const errors = { 401: AgentApiError, 403: AgentApiError, 429: SharedRateLimitError, 503: AgentApiError };

const meOf = ({ agent, context: ctx }: Caller) => ({
  principal: { id: ctx.principal_id, name: ctx.principal_name },
  registration: { id: ctx.registration_id, type: ctx.registration_type, claim_state: ctx.claim_state },
  workspace: { id: ctx.tenant_id, name: ctx.tenant_name, plan: ctx.plan },
  scopes: agent.scopes,
  token_expires_at: new Date(agent.expiresAt * 1000).toISOString(),
});

export const identityOperations = [
  defineOperation({
    operationId: 'getAgentMe',
    method: 'GET',
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
    path: '/api/agent/v1/capabilities',
    summary: 'Identity, claim state, plan, quota, models, setup and approval state, and the safe next actions',
    description: 'The authority for what the caller may do now; read it first and follow `next_actions`.',
    response: Capabilities,
    errors,
    mcp: { title: 'Capabilities and next actions', readOnly: true },
    run: async (app, { agent, context }) => capabilitiesOf(context, agent, app.config),
  }),
];

const agentIdentityRoutes: FastifyPluginAsyncZod = async (app) => {
  for (const op of identityOperations) registerHttpOperation(app, op);
};

export default agentIdentityRoutes;
