// People: created by an operator command (ops/accounts.ts), log in with
// e-mail and password, may be the platform operator. External identity
// providers attach later through user_identities (one user, many ways in).
import { z } from 'zod';
import { TenantRoleSchema } from '../tenants/roles.ts';
import { sql, type CommonQueryMethods, type DatabasePool, type DatabaseTransactionConnection } from '../db/pool.ts';
import { decoyHash, hashPassword, verifyPassword } from '../crypto/passwords.ts';
import { canonicalEmail } from './email.ts';

export const UserRow = z.object({
  id: z.string(),
  email: z.string(),
  display_name: z.string().nullable(),
  avatar_url: z.string().nullable(),
  is_operator: z.boolean(),
});
export type UserRow = z.infer<typeof UserRow>;
const userRow = sql.type(UserRow);

export class EmailTakenError extends Error {
  override name = 'EmailTakenError';
}

/** An address canonicalEmail refuses (core/accounts/email.ts): no account is made for it. */
export class EmailRefusedError extends Error {
  override name = 'EmailRefusedError';
}

export async function createUser(
  db: DatabasePool,
  input: { email: string; password: string; displayName?: string; operator?: boolean },
): Promise<UserRow> {
  const passwordHash = await hashPassword(input.password);
  return db.transaction((tx) => createUserIn(tx, { ...input, passwordHash }));
}

/**
 * Creates the account inside the caller's transaction (the password already
 * hashed, outside it). `emailVerified: false` marks an e-mail nobody proved
 * (an invitation link the Admin saw): never linked to an external login by e-mail.
 */
export async function createUserIn(
  tx: CommonQueryMethods,
  input: { email: string; passwordHash: string; displayName?: string; operator?: boolean; emailVerified?: boolean },
): Promise<UserRow> {
  const key = canonicalEmail(input.email);
  if (!key) throw new EmailRefusedError(`${JSON.stringify(input.email)} is not an e-mail address accounts can have`);
  // users.email_key is set from the address by a trigger (canonical_email(), the SQL twin).
  const taken = await tx.exists(sql.unsafe`select 1 from users where email_key = ${key}`);
  if (taken) throw new EmailTakenError(`an account with e-mail ${input.email} already exists`);
  const user = await tx.one(userRow`
    insert into users (email, display_name, password_hash, is_operator, email_verified)
    values (${input.email}, ${input.displayName ?? null}, ${input.passwordHash}, ${input.operator ?? false}, ${input.emailVerified ?? true})
    returning id, email, display_name, avatar_url, is_operator`);
  await tx.query(sql.unsafe`
    insert into user_identities (user_id, provider, subject, email) values (${user.id}, 'password', ${user.id}, ${user.email})`);
  return user;
}

/**
 * The user whose password matches, or null. An unknown (or refused) e-mail
 * costs the same scrypt work as a wrong password, so the answer time gives
 * nothing away.
 */
export async function checkPassword(db: CommonQueryMethods, email: string, password: string): Promise<UserRow | null> {
  const key = canonicalEmail(email);
  const row = key
    ? await db.maybeOne(sql.type(UserRow.extend({ password_hash: z.string().nullable() }))`
        select id, email, display_name, avatar_url, is_operator, password_hash from users where email_key = ${key}`)
    : null;
  const ok = await verifyPassword(password, row?.password_hash ?? (await decoyHash()));
  if (!row?.password_hash || !ok) return null;
  const { password_hash: _hash, ...user } = row;
  return user;
}

export async function findUser(db: CommonQueryMethods, userId: string): Promise<UserRow | null> {
  return db.maybeOne(userRow`select id, email, display_name, avatar_url, is_operator from users where id = ${userId}`);
}

export const MembershipRow = z.object({ tenant_id: z.string(), tenant_name: z.string(), role: TenantRoleSchema });

export async function membershipsOf(db: CommonQueryMethods, userId: string) {
  return db.any(sql.type(MembershipRow)`
    select m.tenant_id, t.name as tenant_name, m.role from tenant_memberships m
    join tenants t on t.id = m.tenant_id
    where m.user_id = ${userId} order by t.created_at, t.id`);
}

/**
 * Deletes the account for good. Tenants where the user was the only member
 * go with it (cascading to everything in them); shared tenants live on with
 * their other members and data (rows the user created there lose the author).
 */
export async function deleteAccount(
  db: DatabasePool | DatabaseTransactionConnection,
  userId: string,
): Promise<{ deletedTenants: number }> {
  return db.transaction(async (tx) => {
    // Lock the user's memberships' tenants so a concurrent invite cannot
    // turn a sole-member tenant into a shared one mid-way.
    const soleTenants = await tx.anyFirst(sql.type(z.object({ tenant_id: z.string() }))`
      select m.tenant_id from tenant_memberships m
      where m.user_id = ${userId}
        and not exists (select 1 from tenant_memberships o where o.tenant_id = m.tenant_id and o.user_id <> ${userId})
      for update`);
    if (soleTenants.length > 0) {
      // Each workspace's jobs lock first, as an enqueue takes it (migration
      // 0053), before the DELETE locks the workspace's row: in the other order
      // an enqueue holding it and then checking a foreign key to the row
      // would wait for this deletion while it waits for the enqueue.
      await tx.query(sql.unsafe`
        select pg_advisory_xact_lock(hashtextextended('tenant-jobs:' || t.id::text, 0))
        from unnest(${sql.array(soleTenants, 'uuid')}::uuid[]) as t(id) order by t.id`);
      await tx.query(sql.unsafe`delete from tenants where id = any(${sql.array(soleTenants, 'uuid')})`);
    }
    await tx.query(sql.unsafe`delete from users where id = ${userId}`);
    return { deletedTenants: soleTenants.length };
  });
}
