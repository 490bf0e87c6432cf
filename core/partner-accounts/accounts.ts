// Connected partner accounts: storing a grant (tokens sealed, scopes per
// service, added to what the same person's same partner account already
// granted), the person's list, activation for the tenant's agents, and
// removal (tokens off the account at once, revoked at the provider by a job).
//
// The rule "one active account per service per tenant" is a partial unique
// index (partner_account_services_one_active_idx); activating an account's
// service moves it there from whichever account had it (the latest wins),
// serialised per tenant by a transaction-scoped advisory lock.
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import type { Keyring } from '../crypto/keyring.ts';
import { sql, type CommonQueryMethods } from '../db/pool.ts';
import { grantedPerService } from './catalog.ts';
import { PartnerAccountError, sealToken } from './client.ts';

/** Added by the partner_accounts triggers (migrations 0025, 0026) when an account's tokens leave it. */
export const PARTNER_REVOCATION_JOB = 'partner.token-revocation';

export type Grant = {
  tenantId: string;
  userId: string;
  subject: string;
  email: string | null;
  services: string[];
  grantedScopes: string[];
  accessToken: string;
  refreshToken: string | null;
  expiresInS: number | null;
};

const Existing = z.object({ id: z.string(), granted_scopes: z.array(z.string()) });

/** Stores a grant on the person's account for this subject (created on the first grant); returns the account id. */
export async function storeGrant(tx: CommonQueryMethods, keyring: Keyring, grant: Grant): Promise<string> {
  // Two callbacks for the same new account at once: the second waits and updates the first's row.
  await tx.query(
    sql.unsafe`select pg_advisory_xact_lock(hashtextextended(${`partner-account|${grant.tenantId}|${grant.userId}|${grant.subject}`}, 0))`,
  );
  const existing = await tx.maybeOne(sql.type(Existing)`
    select id, granted_scopes from partner_accounts
    where tenant_id = ${grant.tenantId} and user_id = ${grant.userId} and subject = ${grant.subject} and state <> 'revoked'
    for update`);
  const id = existing?.id ?? randomUUID();
  const scopes = [...new Set([...(existing?.granted_scopes ?? []), ...grant.grantedScopes])];
  const access = sealToken(keyring, id, 'access', grant.accessToken);
  const refresh = grant.refreshToken ? sealToken(keyring, id, 'refresh', grant.refreshToken) : null;
  const expires = grant.expiresInS === null ? null : sql.fragment`now() + make_interval(secs => ${grant.expiresInS})`;
  if (existing) {
    await tx.query(sql.unsafe`
      update partner_accounts set state = 'connected', email = coalesce(${grant.email}, email), access_token_sealed = ${access},
        refresh_token_sealed = coalesce(${refresh}, refresh_token_sealed), access_expires_at = ${expires},
        granted_scopes = ${sql.array(scopes, 'text')}, updated_at = now()
      where id = ${id}`);
  } else {
    await tx.query(sql.unsafe`
      insert into partner_accounts (id, tenant_id, user_id, subject, email, access_token_sealed, refresh_token_sealed, access_expires_at, granted_scopes)
      values (${id}, ${grant.tenantId}, ${grant.userId}, ${grant.subject}, ${grant.email}, ${access}, ${refresh}, ${expires}, ${sql.array(scopes, 'text')})`);
  }
  for (const service of grantedPerService(grant.services, new Set(grant.grantedScopes))) {
    await tx.query(sql.unsafe`
      insert into partner_account_services (account_id, tenant_id, service_id, scopes)
      values (${id}, ${grant.tenantId}, ${service.serviceId}, ${sql.array(service.scopes, 'text')})
      on conflict (account_id, service_id) do update
        set scopes = array(select distinct unnest(partner_account_services.scopes || excluded.scopes) order by 1)`);
  }
  return id;
}

const AccountRow = z.object({
  id: z.string(),
  subject: z.string(),
  email: z.string().nullable(),
  state: z.enum(['connected', 'needs_reauth']),
  granted_scopes: z.array(z.string()),
  connected_at: z.string(),
  last_used_at: z.string().nullable(),
  services: z.array(z.object({ serviceId: z.string(), scopes: z.array(z.string()), active: z.boolean() })),
});
export type AccountRow = z.infer<typeof AccountRow>;

export type AccountStatus = 'active' | 'inactive' | 'needs_reauth' | 'revoked';

/** active: the tenant's agents use it for at least one service; inactive: connected, used for none. */
export const statusOf = (a: AccountRow): AccountStatus =>
  a.state === 'needs_reauth' ? 'needs_reauth' : a.services.some((s) => s.active) ? 'active' : 'inactive';

const accountsQuery = (tenantId: string, userId: string, accountId: string | null) => sql.type(AccountRow)`
  select a.id, a.subject, a.email, a.state, a.granted_scopes, a.connected_at, a.last_used_at,
    coalesce((select json_agg(json_build_object('serviceId', s.service_id, 'scopes', s.scopes, 'active', s.active) order by s.service_id)
              from partner_account_services s where s.account_id = a.id), '[]'::json) as services
  from partner_accounts a
  where a.tenant_id = ${tenantId} and a.user_id = ${userId} and a.state <> 'revoked'
    ${accountId ? sql.fragment`and a.id = ${accountId}` : sql.fragment``}
  order by a.connected_at, a.id`;

/** The person's connected accounts in the tenant (removed ones are gone at once). */
export const listAccounts = (db: CommonQueryMethods, tenantId: string, userId: string) =>
  db.any(accountsQuery(tenantId, userId, null));

export const findAccount = (db: CommonQueryMethods, tenantId: string, userId: string, accountId: string) =>
  db.maybeOne(accountsQuery(tenantId, userId, accountId));

const notFound = () => new PartnerAccountError(404, 'not_found', 'No such connected account.');

/** Makes this account the one the tenant's agents use for its services (all, or the ones named). */
export async function activateAccount(
  tx: CommonQueryMethods,
  tenantId: string,
  userId: string,
  accountId: string,
  services?: string[],
): Promise<AccountRow> {
  await tx.query(sql.unsafe`select pg_advisory_xact_lock(hashtext(${`partner-services:${tenantId}`}))`);
  const account = await findAccount(tx, tenantId, userId, accountId);
  if (!account) throw notFound();
  if (account.state === 'needs_reauth') {
    throw new PartnerAccountError(
      409,
      'needs_reauth',
      "The provider no longer accepts this account's grant; connect it again (POST /oauth/partner/start) before activating it.",
    );
  }
  const own = account.services.map((s) => s.serviceId);
  const chosen = services ?? own;
  const missing = chosen.filter((id) => !own.includes(id));
  if (missing.length > 0)
    throw new PartnerAccountError(
      400,
      'service_not_granted',
      `This account has no grant for ${missing.join(', ')}; connect it with those services first.`,
    );
  if (chosen.length > 0) {
    await tx.query(sql.unsafe`
      update partner_account_services set active = false
      where tenant_id = ${tenantId} and service_id = any(${sql.array(chosen, 'text')}) and active and account_id <> ${accountId}`);
    await tx.query(sql.unsafe`
      update partner_account_services set active = true where account_id = ${accountId} and service_id = any(${sql.array(chosen, 'text')})`);
  }
  return (await findAccount(tx, tenantId, userId, accountId))!;
}

const Removed = z.object({ access_token_sealed: z.string().nullable(), refresh_token_sealed: z.string().nullable() });

/**
 * Removes the account: its tokens leave the account row and its services go
 * in this transaction (it is unlisted and unusable at once). The table's
 * trigger moves the sealed tokens to partner_token_revocations and adds the
 * revocation job, as it does when an account is deleted with its person or
 * tenant. Returns whether a revocation was queued (false when the account
 * held no tokens).
 */
export async function removeAccount(
  tx: CommonQueryMethods,
  tenantId: string,
  userId: string,
  accountId: string,
): Promise<boolean> {
  const old = await tx.maybeOne(sql.type(Removed)`
    select access_token_sealed, refresh_token_sealed from partner_accounts
    where id = ${accountId} and tenant_id = ${tenantId} and user_id = ${userId} and state <> 'revoked'
    for update`);
  if (!old) throw notFound();
  await tx.query(sql.unsafe`
    update partner_accounts set state = 'revoked', access_token_sealed = null, refresh_token_sealed = null, revoked_at = now(), updated_at = now()
    where id = ${accountId}`);
  await tx.query(sql.unsafe`delete from partner_account_services where account_id = ${accountId}`);
  return old.access_token_sealed !== null || old.refresh_token_sealed !== null;
}
