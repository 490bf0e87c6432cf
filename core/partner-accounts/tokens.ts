// withPartnerAccessToken: how agent-side code uses a connected account.
//
//   await withPartnerAccessToken(db, config, tenantId, 'calendar', async (token, account) => {
//     return fetch(calendarUrl, { headers: { authorization: `Bearer ${token}` } });
//   });
//
// It finds the tenant's active account for the service, refreshes an access
// token that has expired (or expires within 30 s) with the refresh token
// first, and hands the token to fn. One refresh at a time per account: the
// refresh runs in a transaction holding the account row `for update`, and a
// caller that waited for the lock finds the new token and does not refresh
// again. A refresh the provider refuses (invalid_grant) marks the account
// needs_reauth; the person must connect it again.
import * as oidc from 'openid-client';
import { z } from 'zod';
import type { Config } from '../config.ts';
import { Keyring } from '../crypto/keyring.ts';
import { sql, type DatabasePool } from '../db/pool.ts';
import { providerFailure } from '../external-login/clients.ts';
import { openToken, PartnerAccountError, partnerClient, sealToken } from './client.ts';

/** A token this close to its expiry is refreshed before use. */
const EXPIRY_MARGIN_S = 30;

const Active = z.object({
  id: z.string(),
  state: z.enum(['connected', 'needs_reauth']),
  access_token_sealed: z.string().nullable(),
  fresh: z.boolean(),
  scopes: z.array(z.string()),
});

export type PartnerAccountUse = { accountId: string; serviceId: string; scopes: string[] };

const needsReauth = (serviceId: string) =>
  new PartnerAccountError(
    409,
    'needs_reauth',
    `The ${serviceId} account's grant was refused by the provider; its owner must connect it again.`,
  );

export async function withPartnerAccessToken<T>(
  db: DatabasePool,
  config: Config,
  tenantId: string,
  serviceId: string,
  fn: (accessToken: string, account: PartnerAccountUse) => Promise<T>,
): Promise<T> {
  const row = await db.maybeOne(sql.type(Active)`
    select a.id, a.state, a.access_token_sealed, s.scopes,
           (a.access_expires_at is null or a.access_expires_at > now() + make_interval(secs => ${EXPIRY_MARGIN_S})) as fresh
    from partner_account_services s join partner_accounts a on a.id = s.account_id
    where s.tenant_id = ${tenantId} and s.service_id = ${serviceId} and s.active and a.state <> 'revoked'`);
  if (!row)
    throw new PartnerAccountError(
      404,
      'partner_account_not_connected',
      `No connected account is active for ${serviceId} in this workspace.`,
    );
  if (row.state === 'needs_reauth') throw needsReauth(serviceId);
  const keyring = Keyring.fromConfig(config);
  const token =
    row.fresh && row.access_token_sealed
      ? openToken(keyring, row.id, 'access', row.access_token_sealed)
      : await refreshAccessToken(db, config, keyring, row.id);
  if (token === null) throw needsReauth(serviceId);
  await db.query(sql.unsafe`update partner_accounts set last_used_at = now() where id = ${row.id}`);
  return fn(token, { accountId: row.id, serviceId, scopes: row.scopes });
}

const Locked = z.object({
  state: z.enum(['connected', 'needs_reauth', 'revoked']),
  access_token_sealed: z.string().nullable(),
  refresh_token_sealed: z.string().nullable(),
  fresh: z.boolean(),
});

/** The account's current access token, refreshed under the row lock; null when the grant is gone (needs_reauth). */
export async function refreshAccessToken(
  db: DatabasePool,
  config: Config,
  keyring: Keyring,
  accountId: string,
): Promise<string | null> {
  return db.transaction(async (tx) => {
    const row = await tx.maybeOne(sql.type(Locked)`
      select state, access_token_sealed, refresh_token_sealed,
             (access_expires_at is null or access_expires_at > now() + make_interval(secs => ${EXPIRY_MARGIN_S})) as fresh
      from partner_accounts where id = ${accountId} for update`);
    if (row?.state !== 'connected') return null;
    // Another caller refreshed while this one waited for the lock.
    if (row.fresh && row.access_token_sealed) return openToken(keyring, accountId, 'access', row.access_token_sealed);
    const markNeedsReauth = async () => {
      await tx.query(
        sql.unsafe`update partner_accounts set state = 'needs_reauth', updated_at = now() where id = ${accountId}`,
      );
      return null;
    };
    if (!row.refresh_token_sealed) return markNeedsReauth();
    const client = await partnerClient(config).catch((error: unknown) => {
      throw new PartnerAccountError(502, 'provider_unavailable', providerFailure(error, 'discovery').message);
    });
    let tokens: oidc.TokenEndpointResponse & oidc.TokenEndpointResponseHelpers;
    try {
      tokens = await oidc.refreshTokenGrant(client, openToken(keyring, accountId, 'refresh', row.refresh_token_sealed));
    } catch (error) {
      if (
        error instanceof oidc.ResponseBodyError &&
        error.status < 500 &&
        (error.error === 'invalid_grant' || error.error === 'unauthorized_client')
      ) {
        return markNeedsReauth();
      }
      const failure = providerFailure(error, 'token');
      throw new PartnerAccountError(502, 'provider_unavailable', failure.message);
    }
    const expires =
      tokens.expires_in === undefined ? null : sql.fragment`now() + make_interval(secs => ${tokens.expires_in})`;
    const refresh = tokens.refresh_token ? sealToken(keyring, accountId, 'refresh', tokens.refresh_token) : null;
    await tx.query(sql.unsafe`
      update partner_accounts set access_token_sealed = ${sealToken(keyring, accountId, 'access', tokens.access_token)},
        refresh_token_sealed = coalesce(${refresh}, refresh_token_sealed), access_expires_at = ${expires}, updated_at = now()
      where id = ${accountId}`);
    return tokens.access_token;
  });
}
