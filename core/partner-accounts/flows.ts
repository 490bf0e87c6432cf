// Connect flows: started by a signed-in person for a tenant, finished by the
// provider's redirect to /oauth/partner/callback. The row keeps the state
// (hashed), the PKCE verifier (sealed, cleared when the flow ends), the
// chosen services, and the browser that started it (a cookie, hashed): a
// state taken to another browser cannot attach someone else's partner
// account to this person's workspace. The outcome stays on the row for
// GET /oauth/partner/status.
import { z } from 'zod';
import * as oidc from 'openid-client';
import type { Keyring } from '../crypto/keyring.ts';
import { constantTimeEqual, sha256 } from '../crypto/tokens.ts';
import { sql, type CommonQueryMethods } from '../db/pool.ts';

export const CONNECT_FLOW_TTL_S = 600;

const aad = (stateHash: string) => `partner-connect-flow|${stateHash}`;

export type StartedConnectFlow = { flowId: string; state: string; codeChallenge: string };

export async function startConnectFlow(
  db: CommonQueryMethods,
  keyring: Keyring,
  input: { tenantId: string; userId: string; services: string[]; browserToken: string },
): Promise<StartedConnectFlow> {
  const state = oidc.randomState();
  const verifier = oidc.randomPKCECodeVerifier();
  const stateHash = sha256(state);
  const flowId = await db.oneFirst(sql.type(z.object({ id: z.string() }))`
    insert into partner_connect_flows (tenant_id, user_id, state_hash, browser_hash, code_verifier_sealed, services, expires_at)
    values (${input.tenantId}, ${input.userId}, ${stateHash}, ${sha256(input.browserToken)}, ${keyring.sealPacked(verifier, aad(stateHash))},
            ${sql.array(input.services, 'text')}, now() + make_interval(secs => ${CONNECT_FLOW_TTL_S}))
    returning id`);
  return { flowId, state, codeChallenge: await oidc.calculatePKCECodeChallenge(verifier) };
}

const Taken = z.object({
  id: z.string(),
  tenant_id: z.string(),
  user_id: z.string(),
  state_hash: z.string(),
  browser_hash: z.string(),
  code_verifier_sealed: z.string(),
  services: z.array(z.string()),
});

export type TakenConnectFlow = {
  id: string;
  tenantId: string;
  userId: string;
  services: string[];
  codeVerifier: string;
};

/**
 * Takes the pending flow of this state once: the verifier is cleared in the
 * same statement, so a replayed state finds nothing. A state brought by
 * another browser spends the flow (failed, other_browser).
 */
export async function takeConnectFlow(
  db: CommonQueryMethods,
  keyring: Keyring,
  state: string,
  browserToken: string | undefined,
): Promise<{ flow: TakenConnectFlow } | { error: 'unknown_state' | 'other_browser'; flowId?: string }> {
  const row = await db.maybeOne(sql.type(Taken)`
    update partner_connect_flows f set code_verifier_sealed = null
    from (select id, code_verifier_sealed from partner_connect_flows
          where state_hash = ${sha256(state)} and status = 'pending' and code_verifier_sealed is not null and expires_at > now()
          for update) old
    where f.id = old.id
    returning f.id, f.tenant_id, f.user_id, f.state_hash, f.browser_hash, old.code_verifier_sealed, f.services`);
  if (!row) return { error: 'unknown_state' };
  if (!browserToken || !constantTimeEqual(sha256(browserToken), row.browser_hash)) {
    await finishConnectFlow(db, row.id, { status: 'failed', reason: 'other_browser' });
    return { error: 'other_browser', flowId: row.id };
  }
  const codeVerifier = keyring.openPacked(row.code_verifier_sealed, aad(row.state_hash));
  return { flow: { id: row.id, tenantId: row.tenant_id, userId: row.user_id, services: row.services, codeVerifier } };
}

export async function finishConnectFlow(
  db: CommonQueryMethods,
  flowId: string,
  outcome: { status: 'completed'; accountId: string } | { status: 'failed'; reason: string },
): Promise<void> {
  await db.query(sql.unsafe`
    update partner_connect_flows
    set status = ${outcome.status}, reason = ${outcome.status === 'failed' ? outcome.reason : null},
        account_id = ${outcome.status === 'completed' ? outcome.accountId : null}, code_verifier_sealed = null, finished_at = now()
    where id = ${flowId}`);
}

const StatusRow = z.object({
  status: z.enum(['pending', 'completed', 'failed']),
  reason: z.string().nullable(),
  services: z.array(z.string()),
  account_id: z.string().nullable(),
  expired: z.boolean(),
  created_at: z.string(),
  finished_at: z.string().nullable(),
});

/** The flow's outcome; a pending flow past its expiry reads as failed (expired). */
export async function connectFlowStatus(db: CommonQueryMethods, flowId: string) {
  const row = await db.maybeOne(sql.type(StatusRow)`
    select status, reason, services, account_id::text, (status = 'pending' and expires_at <= now()) as expired, created_at, finished_at
    from partner_connect_flows where id = ${flowId}`);
  if (!row) return null;
  if (row.expired) return { ...row, status: 'failed' as const, reason: 'expired' };
  return row;
}
