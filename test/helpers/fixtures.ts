// Rows the engine tests need: a tenant with a member and a platform token.
import { randomUUID } from 'node:crypto';
import { signPlatformToken } from '../../core/auth/platform-token.ts';
import type { Config } from '../../core/config.ts';
import { Keyring } from '../../core/crypto/keyring.ts';
import { sql, type DatabasePool } from '../../core/db/pool.ts';
import { enqueueJob, type JobSpec } from '../../core/jobs/enqueue.ts';
import { putKey } from '../../core/provider-keys/keys.ts';
import { TEST_SECRET } from './config.ts';

export type Member = { tenantId: string; userId: string; token: string };

export async function createMember(db: DatabasePool, role: 'admin' | 'viewer' = 'admin'): Promise<Member> {
  const tenantId = randomUUID();
  const userId = randomUUID();
  await db.transaction(async (tx) => {
    await tx.query(sql.unsafe`insert into tenants (id, name) values (${tenantId}, 'Test tenant')`);
    await tx.query(sql.unsafe`insert into users (id, email) values (${userId}, ${`${userId}@example.test`})`);
    await tx.query(
      sql.unsafe`insert into tenant_memberships (tenant_id, user_id, role) values (${tenantId}, ${userId}, ${role})`,
    );
  });
  const token = await signPlatformToken({ userId }, Buffer.from(TEST_SECRET, 'base64'), 'http://localhost:3000');
  return { tenantId, userId, token };
}

/** Puts the member's tenant on Pro with its own OpenAI key (a fake provider's), so its sessions may use openai/ models. */
export async function withOwnOpenAIKey(
  db: DatabasePool,
  config: Config,
  member: Member,
  apiKey: string,
): Promise<void> {
  await db.query(sql.unsafe`update tenants set plan = 'pro' where id = ${member.tenantId}`);
  await putKey(db, Keyring.fromConfig(config), {
    tenantId: member.tenantId,
    provider: 'openai',
    apiKey,
    userId: member.userId,
  });
}

/**
 * Marks a registration claimed as the ceremony does: by a person (made here)
 * who becomes Admin of the agent's workspace, so the agent stays linked.
 */
export async function markClaimed(db: DatabasePool, registrationId: string): Promise<string> {
  const userId = randomUUID();
  await db.transaction(async (tx) => {
    await tx.query(sql.unsafe`insert into users (id, email) values (${userId}, ${`${userId}@example.test`})`);
    await tx.query(sql.unsafe`
      insert into tenant_memberships (tenant_id, user_id, role) select tenant_id, ${userId}, 'admin' from agent_registrations where id = ${registrationId}`);
    await tx.query(sql.unsafe`
      update agent_registrations set claim_state = 'claimed', claimed_by = ${userId}, claimed_at = now() where id = ${registrationId}`);
  });
  return userId;
}

export async function enqueue(db: DatabasePool, spec: JobSpec): Promise<string> {
  return (await db.transaction((tx) => enqueueJob(tx, spec))).id;
}

/** A company of the tenant and one configured agent of it: real scope ids for insight boards. */
export async function createBoardScopes(
  db: DatabasePool,
  tenantId: string,
): Promise<{ companyId: string; agentId: string }> {
  const companyId = randomUUID();
  const agentId = randomUUID();
  await db.transaction(async (tx) => {
    await tx.query(sql.unsafe`insert into companies (id, tenant_id, name) values (${companyId}, ${tenantId}, 'Acme')`);
    await tx.query(
      sql.unsafe`insert into company_agents (id, tenant_id, company_id, name) values (${agentId}, ${tenantId}, ${companyId}, 'Bot')`,
    );
  });
  return { companyId, agentId };
}

export type Account = { userId: string; token: string; tenants: string[] };

/**
 * A person's account owning `workspaces` workspaces on `plan` (they created
 * them and are Admin of each): fairness and quotas count by account.
 */
export async function createAccount(
  db: DatabasePool,
  workspaces = 1,
  plan: 'free' | 'pro' | 'enterprise' = 'free',
): Promise<Account> {
  const userId = randomUUID();
  const tenants = Array.from({ length: workspaces }, () => randomUUID());
  await db.transaction(async (tx) => {
    await tx.query(sql.unsafe`insert into users (id, email) values (${userId}, ${`${userId}@example.test`})`);
    for (const tenantId of tenants) {
      await tx.query(
        sql.unsafe`insert into tenants (id, name, plan, created_by, owner_id) values (${tenantId}, 'Workspace', ${plan}, ${userId}, ${userId})`,
      );
      await tx.query(
        sql.unsafe`insert into tenant_memberships (tenant_id, user_id, role) values (${tenantId}, ${userId}, 'admin')`,
      );
    }
  });
  const token = await signPlatformToken({ userId }, Buffer.from(TEST_SECRET, 'base64'), 'http://localhost:3000');
  return { userId, token, tenants };
}
