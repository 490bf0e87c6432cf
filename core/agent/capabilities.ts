// The calling agent's registration, principal and workspace in one read
// (agentContext; cached per replica by the agent-auth plugin), and what it
// may do right now, and the safe next steps where it may not.
// The capability response is the authority: clients read it instead of
// guessing from errors.
import { z } from 'zod';
import { sql, type CommonQueryMethods } from '../db/pool.ts';
import { AGENT_SCOPES, POST_CLAIM_SCOPES, type AgentScope } from '../identity/tokens.ts';
import { OFFLINE_MODEL, planOf } from '../plans.ts';

export const AgentContextRow = z.object({
  registration_status: z.enum(['active', 'revoked']),
  principal_status: z.enum(['active', 'unlinked']),
  registration_id: z.string(),
  registration_type: z.enum(['anonymous', 'service_auth']),
  claim_state: z.enum(['unclaimed', 'pending', 'claimed']),
  claimed_at: z.string().nullable(),
  principal_id: z.string(),
  principal_name: z.string(),
  tenant_id: z.string(),
  tenant_name: z.string(),
  plan: z.string(),
});
export type AgentContextRow = z.infer<typeof AgentContextRow>;

export async function agentContext(db: CommonQueryMethods, registrationId: string): Promise<AgentContextRow | null> {
  return db.maybeOne(sql.type(AgentContextRow)`
    select r.status as registration_status, p.status as principal_status,
      r.id as registration_id, r.type as registration_type, r.claim_state, r.claimed_at,
      p.id as principal_id, p.display_name as principal_name, t.id as tenant_id, t.name as tenant_name, t.plan
    from agent_registrations r
    join agent_principals p on p.id = r.principal_id
    join tenants t on t.id = r.tenant_id
    where r.id = ${registrationId}`);
}

export type NextAction = {
  action: 'claim_account' | 'change_plan' | 'refresh_registration';
  actor: 'agent' | 'person';
  reason: string;
  method?: 'POST';
  endpoint?: string;
  url?: string;
};

export function capabilitiesOf(
  ctx: AgentContextRow,
  token: { scopes: AgentScope[]; expiresAt: number },
  urls: { authUrl: string; baseUrl: string },
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
  return {
    identity: {
      principal_id: ctx.principal_id,
      principal_name: ctx.principal_name,
      registration_id: ctx.registration_id,
      registration_type: ctx.registration_type,
      workspace: { id: ctx.tenant_id, name: ctx.tenant_name },
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
    plan: { name: plan.name, company_work: plan.companyWork },
    quota: { period: 'month' as const, messages_limit: plan.monthlyMessages },
    models: { allowed: [...plan.models], default: OFFLINE_MODEL },
    setup: { complete: true, pending_steps: [] as string[] },
    approvals: { pending: [] as string[] },
    next_actions: next,
  };
}
