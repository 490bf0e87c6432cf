// The soak's tenants, people, sessions and agents. A workspace's first
// person and the workspace are written as `npm run user:create` would leave
// them (rows, plus each tenant's own model key); its second person, a
// Member, joins through an invitation and its acceptance, and sessions and
// agents come through the public API, as clients make them.
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { signPlatformToken } from '../../core/auth/platform-token.ts';
import { Keyring } from '../../core/crypto/keyring.ts';
import { sql } from '../../core/db/pool.ts';
import { putKey } from '../../core/provider-keys/keys.ts';
import type { SoakClient } from './client.ts';
import type { SoakPlatform } from './platform.ts';

export type SoakTenant = {
  tenantId: string;
  userId: string;
  /** The Admin's (owner's) token, and a Member's, who joined by invitation. */
  token: () => Promise<string>;
  memberToken: () => Promise<string>;
  sessions: string[];
};
export type SoakAgent = { tenantId: string; companyId: string; token: () => Promise<string> };

/** A token source that signs again before the old one expires. */
function renewing(sign: () => Promise<string>, ttlMs: number): () => Promise<string> {
  let current: { token: string; at: number } | null = null;
  return async () => {
    if (!current || Date.now() - current.at > ttlMs / 2) current = { token: await sign(), at: Date.now() };
    return current.token;
  };
}

export async function seedTenants(
  platform: SoakPlatform,
  client: SoakClient,
  count: number,
  sessionsEach: number,
  plan: 'pro' | 'free' = 'pro',
): Promise<SoakTenant[]> {
  const { config } = platform;
  const keyring = Keyring.fromConfig(config);
  const tenants: SoakTenant[] = [];
  for (let i = 0; i < count; i++) {
    const userId = randomUUID();
    const tenantId = await platform.db.transaction(async (tx) => {
      await tx.query(
        sql.unsafe`insert into users (id, email) values (${userId}, ${`soak-${plan}-${i}-${userId}@soak.test`})`,
      );
      const id = await tx.oneFirst(sql.type(z.object({ id: z.string() }))`
        insert into tenants (name, plan, owner_id) values (${`Soak ${plan} ${i + 1}`}, ${plan}, ${userId}) returning id`);
      await tx.query(
        sql.unsafe`insert into tenant_memberships (tenant_id, user_id, role) values (${id}, ${userId}, 'admin')`,
      );
      return id;
    });
    await putKey(platform.db, keyring, {
      tenantId,
      provider: 'openai',
      apiKey: `sk-soak-${plan}-${i}-key-000000`,
      userId,
    });
    const token = renewing(
      () => signPlatformToken({ userId }, config.secrets.PLATFORM_JWT_SECRET, config.authUrl),
      15 * 60_000,
    );
    const headers = { authorization: `Bearer ${await token()}`, 'x-tenant-id': tenantId };
    const sessions: string[] = [];
    for (let s = 0; s < sessionsEach; s++) {
      const made = await client.until('POST', '/api/chat/sessions', {
        headers,
        body: { title: `Soak ${s + 1}`, model: 'openai/gpt-4o-mini' },
        deadline: Date.now() + 60_000,
      });
      if (made?.status !== 201) throw new Error(`soak: creating a session answered ${made?.status}: ${made?.body}`);
      sessions.push((JSON.parse(made.body) as { id: string }).id);
    }
    const memberId = await inviteMember(client, headers, `soak-member-${plan}-${i}-${userId}@soak.test`);
    const memberToken = renewing(
      () => signPlatformToken({ userId: memberId }, config.secrets.PLATFORM_JWT_SECRET, config.authUrl),
      15 * 60_000,
    );
    tenants.push({ tenantId, userId, token, memberToken, sessions });
  }
  return tenants;
}

/** A Member of the Admin's workspace, joined through POST /api/tenants/invitations and /api/invitations/accept: their user id. */
async function inviteMember(client: SoakClient, admin: Record<string, string>, email: string): Promise<string> {
  const deadline = Date.now() + 60_000;
  const invited = await client.until('POST', '/api/tenants/invitations', {
    headers: admin,
    body: { email, role: 'member' },
    deadline,
  });
  if (invited?.status !== 201) throw new Error(`soak: inviting a member answered ${invited?.status}: ${invited?.body}`);
  const link = (JSON.parse(invited.body) as { link: string }).link;
  const body = {
    token: link.slice(link.indexOf('#') + 1),
    name: 'Soak member',
    password: `soak-member-${randomUUID()}`,
  };
  const accepted = await client.until('POST', '/api/invitations/accept', { body, deadline });
  if (accepted?.status !== 200)
    throw new Error(`soak: accepting an invitation answered ${accepted?.status}: ${accepted?.body}`);
  return (JSON.parse(accepted.body) as { session: { user: { id: string } } }).session.user.id;
}

/** Agents registered over the identity provider, claimed by a person, acting in their own workspace with one company. */
export async function seedAgents(platform: SoakPlatform, client: SoakClient, count: number): Promise<SoakAgent[]> {
  const agents: SoakAgent[] = [];
  for (let i = 0; i < count; i++) {
    const registered = await client.until('POST', '/agent/identity', {
      body: { type: 'anonymous' },
      deadline: Date.now() + 60_000,
    });
    if (registered?.status !== 201)
      throw new Error(`soak: registering an agent answered ${registered?.status}: ${registered?.body}`);
    type Registered = {
      registration: { id: string };
      identity: {
        assertion: string;
        assertion_expires_in: number;
        refresh_token: { value: string };
        workspace_id: string;
      };
    };
    let { registration, identity } = JSON.parse(registered.body) as Registered;
    const userId = randomUUID();
    const companyId = randomUUID();
    const tenantId = identity.workspace_id;
    await platform.db.transaction(async (tx) => {
      await tx.query(
        sql.unsafe`insert into users (id, email) values (${userId}, ${`soak-agent-${i}-${userId}@soak.test`})`,
      );
      await tx.query(
        sql.unsafe`insert into tenant_memberships (tenant_id, user_id, role) values (${tenantId}, ${userId}, 'admin')`,
      );
      await tx.query(
        sql.unsafe`update agent_registrations set claim_state = 'claimed', claimed_by = ${userId}, claimed_at = now() where id = ${registration.id}`,
      );
      await tx.query(
        sql.unsafe`insert into companies (id, tenant_id, name) values (${companyId}, ${tenantId}, 'Soak Co')`,
      );
    });
    let assertionUntil = Date.now() + identity.assertion_expires_in * 1000;
    // An access token lives 5 minutes; the assertion longer. A spent
    // assertion is renewed with the refresh token, which rotates.
    const token = renewing(async () => {
      const deadline = Date.now() + 120_000;
      if (Date.now() > assertionUntil - 60_000) {
        const refreshed = await client.until('POST', '/agent/identity', {
          body: { type: 'refresh', refresh_token: identity.refresh_token.value },
          deadline,
        });
        if (refreshed?.status !== 200)
          throw new Error(`soak: refreshing an agent identity answered ${refreshed?.status}: ${refreshed?.body}`);
        ({ registration, identity } = JSON.parse(refreshed.body) as Registered);
        assertionUntil = Date.now() + identity.assertion_expires_in * 1000;
      }
      const form = new URLSearchParams({
        grant_type: 'urn:ietf:params:oauth:grant-type:jwt-bearer',
        assertion: identity.assertion,
        resource: `${platform.baseUrl}/api/agent`,
      });
      const exchanged = await client.until('POST', '/oauth2/token', { body: form, deadline });
      if (exchanged?.status !== 200)
        throw new Error(`soak: the token endpoint answered ${exchanged?.status}: ${exchanged?.body}`);
      return (JSON.parse(exchanged.body) as { access_token: string }).access_token;
    }, 5 * 60_000);
    agents.push({ tenantId, companyId, token });
  }
  return agents;
}
