// Tenants (workspaces): created by a user who becomes their Admin; read by
// members only. Secrets for integrations are sealed with AES-256-GCM.
import { z } from 'zod';
import { TenantRoleSchema } from './roles.ts';
import { seal } from '../crypto/secretbox.ts';
import { grantInitialCredits } from '../provider-keys/keys.ts';
import { sql, type CommonQueryMethods } from '../db/pool.ts';
import type { Position } from '../paging.ts';

export const DEFAULT_TENANT_SETTINGS = { timezone: 'UTC', locale: 'en', defaultModel: null as string | null };

export const TenantRow = z.object({
  id: z.string(),
  name: z.string(),
  plan: z.string(),
  settings: z.record(z.string(), z.unknown()),
  created_at: z.string(),
});
export type TenantRow = z.infer<typeof TenantRow>;

export class TenantLimitError extends Error {
  override name = 'TenantLimitError';
}

/**
 * Creates a workspace owned by the user (their account). An account may
 * create as many workspaces as the best plan among those it owns allows
 * (plan_limits.max_workspaces; free when it owns none yet). Agent workspaces
 * it claimed join the account but were not created by it, so they do not count.
 */
export async function createTenant(
  db: CommonQueryMethods,
  userId: string,
  name: string,
  initialCreditsMicros = 0,
): Promise<TenantRow> {
  return db.transaction(async (tx) => {
    // Serialise one user's creations so the limit holds under concurrency.
    await tx.query(sql.unsafe`select pg_advisory_xact_lock(hashtext('tenant-create:' || ${userId}))`);
    const owned = await tx.one(sql.type(z.object({ n: z.number(), plan: z.string(), max: z.number() }))`
      select (select count(*)::int from tenants where created_by = ${userId}) as n,
        coalesce(l.plan, f.plan) as plan, coalesce(l.max_workspaces, f.max_workspaces) as max
      from plan_limits f left join lateral account_limits(${userId}) l on true
      where f.plan = 'free'`);
    if (owned.n >= owned.max) {
      throw new TenantLimitError(
        `The account has created ${owned.n} workspaces, the most its ${owned.plan} plan allows; upgrade a workspace to create more.`,
      );
    }
    const tenant = await tx.one(sql.type(TenantRow)`
      insert into tenants (name, settings, created_by, owner_id)
      values (${name}, ${sql.jsonb(DEFAULT_TENANT_SETTINGS)}, ${userId}, ${userId})
      returning id, name, plan, settings, created_at`);
    await tx.query(
      sql.unsafe`insert into tenant_memberships (tenant_id, user_id, role) values (${tenant.id}, ${userId}, 'admin')`,
    );
    // Every workspace a person creates gets the same grant (NEW_TENANT_CREDITS_MICROS), whichever way in.
    if (initialCreditsMicros > 0) await grantInitialCredits(tx, tenant.id, initialCreditsMicros);
    return tenant;
  });
}

export async function findTenantForMember(db: CommonQueryMethods, tenantId: string, userId: string) {
  return db.maybeOne(sql.type(TenantRow.extend({ member_count: z.number(), role: TenantRoleSchema }))`
    select t.id, t.name, t.plan, t.settings, t.created_at, m.role,
      (select count(*)::int from tenant_memberships c where c.tenant_id = t.id) as member_count
    from tenants t join tenant_memberships m on m.tenant_id = t.id and m.user_id = ${userId}
    where t.id = ${tenantId}`);
}

export const TenantListRow = TenantRow.extend({ role: TenantRoleSchema, owned: z.boolean(), cursor_t: z.string() });

/** The tenants the user is a member of, newest first, a keyset page (limit + 1 rows). */
export async function listTenantsOfMember(
  db: CommonQueryMethods,
  userId: string,
  page: { limit: number; after: Position | null },
) {
  return db.any(sql.type(TenantListRow)`
    select t.id, t.name, t.plan, t.settings, t.created_at, m.role, t.owner_id is not distinct from ${userId}::uuid as owned, t.created_at::text as cursor_t
    from tenant_memberships m join tenants t on t.id = m.tenant_id
    where m.user_id = ${userId}
      ${page.after ? sql.fragment`and (t.created_at, t.id) < (${page.after.t}::timestamptz, ${page.after.id}::uuid)` : sql.fragment``}
    order by t.created_at desc, t.id desc
    limit ${page.limit + 1}`);
}

export const SecretMeta = z.object({
  name: z.string(),
  created_at: z.string(),
  updated_at: z.string(),
  inserted: z.boolean(),
});

/** Stores or replaces a secret; returns metadata only, never the value. */
export async function putTenantSecret(
  db: CommonQueryMethods,
  key: Buffer,
  input: { tenantId: string; name: string; value: string; userId: string },
) {
  const sealed = seal(key, input.value, `tenant-secret:${input.tenantId}:${input.name}`);
  return db.one(sql.type(SecretMeta)`
    insert into tenant_secrets (tenant_id, name, ciphertext, created_by)
    values (${input.tenantId}, ${input.name}, ${sealed}, ${input.userId})
    on conflict (tenant_id, name) do update set ciphertext = excluded.ciphertext, updated_at = now()
    returning name, created_at, updated_at, (xmax = 0) as inserted`);
}

export const SessionRow = z.object({ id: z.string(), title: z.string(), created_at: z.string() });

export async function createSession(
  db: CommonQueryMethods,
  tenantId: string,
  userId: string,
  title: string | undefined,
) {
  return db.one(sql.type(SessionRow)`
    insert into chat_sessions (tenant_id, title, created_by)
    values (${tenantId}, ${title ?? 'New session'}, ${userId})
    returning id, title, created_at`);
}
