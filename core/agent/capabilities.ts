// The calling agent's registration, principal and workspace in one read
// (agentContext; cached per replica by the agent-auth plugin), and what it
// may do right now, and the safe next steps where it may not.
// The capability response is the authority: clients read it instead of
// guessing from errors. Its setup and approval state come from the same
// queries restore (readiness) and publish (pending approvals) decide by.
import { z } from 'zod';
import { PendingApproval, pendingApprovalsJson, PENDING_APPROVALS_LISTED } from '../boards/approvals.ts';
import { sql, type CommonQueryMethods } from '../db/pool.ts';
import { AGENT_SCOPES, POST_CLAIM_SCOPES, type AgentScope } from '../identity/tokens.ts';
import { OFFLINE_MODEL, planOf } from '../plans.ts';
import { pendingSteps, readinessFacts, ReadinessFacts, readinessOf } from '../runners/runners.ts';
import { ROLE_TITLES, type TenantRole } from '../tenants/roles.ts';

export const AgentContextRow = z.object({
  registration_status: z.enum(['active', 'revoked']),
  principal_status: z.enum(['active', 'unlinked']),
  registration_id: z.string(),
  registration_type: z.enum(['anonymous', 'service_auth']),
  claim_state: z.enum(['unclaimed', 'pending', 'claimed']),
  claimed_at: z.string().nullable(),
  /** The person who claimed it: the agent acts with their current role in the acting tenant. */
  claimed_by: z.string().nullable(),
  principal_id: z.string(),
  principal_name: z.string(),
  /** The tenant the agent acts in: the organization chosen at its claim, else its own workspace. */
  tenant_id: z.string(),
  tenant_name: z.string(),
  plan: z.string(),
  /** An operator suspended the workspace: every Agent API call is 403 tenant_inactive. */
  tenant_suspended: z.boolean(),
  /** The agent's own workspace (made at registration, kept at the claim). */
  own_tenant_id: z.string(),
  own_tenant_name: z.string(),
  /** Principal active and, once claimed, its person still a member of the acting tenant. */
  linked: z.boolean(),
});
export type AgentContextRow = z.infer<typeof AgentContextRow>;

/** The tenant a registration (alias r) acts in: its claim's organization, else its own workspace. */
export const ACTING_TENANT = sql.fragment`coalesce(r.organization_id, r.tenant_id)`;

export async function agentContext(db: CommonQueryMethods, registrationId: string): Promise<AgentContextRow | null> {
  return db.maybeOne(sql.type(AgentContextRow)`
    select r.status as registration_status, p.status as principal_status,
      r.id as registration_id, r.type as registration_type, r.claim_state, r.claimed_at, r.claimed_by,
      p.id as principal_id, p.display_name as principal_name, t.id as tenant_id, t.name as tenant_name, t.plan,
      t.suspended_at is not null as tenant_suspended, own.id as own_tenant_id, own.name as own_tenant_name,
      p.status = 'active' and (r.claim_state <> 'claimed' or exists (
        select 1 from tenant_memberships m where m.tenant_id = t.id and m.user_id = r.claimed_by)) as linked
    from agent_registrations r
    join agent_principals p on p.id = r.principal_id
    join tenants own on own.id = r.tenant_id
    join tenants t on t.id = ${ACTING_TENANT}
    where r.id = ${registrationId}`);
}

/**
 * What changes without the registration changing (so it is not part of the
 * cached context): the restore readiness facts and the pending publish
 * approvals, read fresh in one statement from the same queries restore and
 * publish decide by.
 */
const LiveState = ReadinessFacts.extend({ pending_approvals: z.array(PendingApproval) });
export type LiveState = z.infer<typeof LiveState>;

export async function liveState(db: CommonQueryMethods, tenantId: string): Promise<LiveState> {
  return db.one(sql.type(LiveState)`
    select f.*, ${pendingApprovalsJson(tenantId)} as pending_approvals
    from (${readinessFacts(tenantId, null)}) f`);
}

export type NextAction = {
  action:
    | 'claim_account'
    | 'change_plan'
    | 'refresh_registration'
    | 'complete_setup'
    | 'await_approval'
    | 'raise_claimer_role';
  actor: 'agent' | 'person';
  reason: string;
  method?: 'POST' | 'PUT' | 'PATCH';
  endpoint?: string;
  url?: string;
};

/**
 * What the agent may do given its claimer's current role in the workspace
 * (null before a claim: no person stands behind it, its scopes decide).
 */
export type AgentAccess = {
  claimer_role: TenantRole | null;
  allowed: string[];
  refused: Array<{ operation: string; needs: TenantRole }>;
};

function raiseRoleAction(ctx: AgentContextRow, access: AgentAccess, baseUrl: string): NextAction | null {
  const needs = access.refused[0]?.needs;
  if (!needs || !access.claimer_role || !ctx.claimed_by) return null;
  return {
    action: 'raise_claimer_role',
    actor: 'person',
    reason: `The person who claimed you is a ${ROLE_TITLES[access.claimer_role]} of this workspace, so ${access.refused.map((r) => r.operation).join(', ')} are refused; a workspace Admin gives them the ${ROLE_TITLES[needs]} role (body {"role": "${needs}"}).`,
    method: 'PATCH',
    endpoint: `${baseUrl}/api/tenants/members/${ctx.claimed_by}`,
  };
}

export function capabilitiesOf(
  ctx: AgentContextRow,
  token: { scopes: AgentScope[]; expiresAt: number },
  urls: { authUrl: string; baseUrl: string; approveUrl: (approvalId: string) => string },
  live: LiveState,
  access: AgentAccess,
) {
  const plan = planOf(ctx.plan);
  const claimed = ctx.claim_state === 'claimed';
  const next: NextAction[] = [];
  if (!claimed) {
    next.push({
      action: 'claim_account',
      actor: 'agent',
      reason: 'Company reads and board publication need a claimed account.',
      method: 'POST',
      endpoint: `${urls.authUrl}/agent/identity/claim`,
    });
  }
  if (!plan.companyWork) {
    next.push({
      action: 'change_plan',
      actor: 'person',
      reason: `The ${plan.name} plan does not include company work; a workspace Admin starts a checkout for the Pro plan (the response's url is for the person).`,
      method: 'POST',
      endpoint: `${urls.baseUrl}/api/billing/checkout`,
    });
  }
  const steps = pendingSteps(live);
  const restore = readinessOf(live);
  if (steps.includes('runner_not_enrolled')) {
    next.push({
      action: 'complete_setup',
      actor: 'person',
      reason:
        'runner_not_enrolled: restoring managed agents needs a runner; a workspace Admin enrolls one and starts it.',
      method: 'POST',
      endpoint: `${urls.baseUrl}/api/runners/enroll`,
    });
  }
  if (steps.includes('run_execution_disabled')) {
    next.push({
      action: 'complete_setup',
      actor: 'person',
      reason: 'run_execution_disabled: a workspace Admin switches run execution on (runExecutionEnabled true).',
      method: 'PUT',
      endpoint: `${urls.baseUrl}/api/tenants/agent-settings`,
    });
  }
  const raise = raiseRoleAction(ctx, access, urls.baseUrl);
  if (raise) next.push(raise);
  const approvals = live.pending_approvals.map((a) => ({
    id: a.id,
    board_id: a.board_id,
    version: a.version,
    visibility: a.visibility,
    created_at: a.created_at,
    requested_by_you: a.requested_by_principal === ctx.principal_id,
    approve_url: urls.approveUrl(a.id),
  }));
  for (const a of approvals.filter((x) => x.requested_by_you)) {
    next.push({
      action: 'await_approval',
      actor: 'person',
      reason: `A tenant Admin decides your request to publish board ${a.board_id} version ${a.version} (${a.visibility}); hand them the url, then send the identical publish request again.`,
      url: a.approve_url,
    });
  }
  return {
    identity: {
      principal_id: ctx.principal_id,
      principal_name: ctx.principal_name,
      registration_id: ctx.registration_id,
      registration_type: ctx.registration_type,
      workspace: { id: ctx.tenant_id, name: ctx.tenant_name },
      own_workspace: { id: ctx.own_tenant_id, name: ctx.own_tenant_name },
    },
    claim: {
      state: ctx.claim_state,
      claimed_at: ctx.claimed_at,
      required_for: claimed ? [] : ['company_reads', 'board_publication'],
    },
    scopes: {
      granted: token.scopes,
      after_claim: claimed ? [] : POST_CLAIM_SCOPES.filter((s) => !token.scopes.includes(s)),
      all: [...AGENT_SCOPES],
    },
    token: { expires_at: new Date(token.expiresAt * 1000).toISOString() },
    access,
    plan: { name: plan.name, company_work: plan.companyWork },
    quota: { period: 'month' as const, messages_limit: plan.monthlyMessages },
    models: { allowed: [...plan.models], default: OFFLINE_MODEL },
    setup: {
      complete: steps.length === 0,
      pending_steps: steps,
      runner_enrolled: live.runner_id !== null,
      run_execution_enabled: live.run_execution_enabled,
      runner_online: live.online,
      gateway_connected: live.gateway_connected,
      restore: restore.ready ? { ready: true, reason: null } : { ready: false, reason: restore.reason },
    },
    approvals: { pending: approvals.map((a) => a.id), items: approvals, listed_max: PENDING_APPROVALS_LISTED },
    next_actions: next,
  };
}
