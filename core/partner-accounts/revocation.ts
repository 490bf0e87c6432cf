// Revocation of a removed account's tokens at the provider (RFC 7009), run
// by the partner.token-revocation job with Graphile's retries. The tokens
// wait in partner_token_revocations (sealed under the account id); each is
// cleared as soon as the provider has accepted its revocation, so a retry
// repeats only what failed, and the row is deleted when both are done.
import * as oidc from 'openid-client';
import { z } from 'zod';
import type { Config } from '../config.ts';
import type { Keyring } from '../crypto/keyring.ts';
import { sql, type DatabasePool } from '../db/pool.ts';
import { providerFailure } from '../external-login/clients.ts';
import { openToken, partnerClient, type TokenKind } from './client.ts';

const Pending = z.object({ access_token_sealed: z.string().nullable(), refresh_token_sealed: z.string().nullable() });

export type RevocationOutcome = 'revoked' | 'nothing_to_revoke' | 'no_revocation_endpoint';

/** Revokes what is left of the account's tokens; throws (to be retried) when the provider fails. */
export async function revokeRemovedTokens(
  db: DatabasePool,
  config: Config,
  keyring: Keyring,
  accountId: string,
): Promise<RevocationOutcome> {
  const row = await db.maybeOne(sql.type(Pending)`
    update partner_token_revocations set attempts = attempts + 1 where account_id = ${accountId}
    returning access_token_sealed, refresh_token_sealed`);
  if (!row) return 'nothing_to_revoke';
  let client: oidc.Configuration;
  try {
    client = await partnerClient(config);
  } catch (error) {
    throw await recordFailure(db, accountId, error);
  }
  if (!client.serverMetadata().revocation_endpoint) {
    // Nothing can ever revoke them here: keep no copy.
    await db.query(sql.unsafe`delete from partner_token_revocations where account_id = ${accountId}`);
    return 'no_revocation_endpoint';
  }
  // The refresh token first: revoking it ends the grant at most providers.
  const order: [TokenKind, string | null][] = [
    ['refresh', row.refresh_token_sealed],
    ['access', row.access_token_sealed],
  ];
  for (const [kind, sealed] of order) {
    if (!sealed) continue;
    try {
      await oidc.tokenRevocation(client, openToken(keyring, accountId, kind, sealed), {
        token_type_hint: `${kind}_token`,
      });
    } catch (error) {
      // unsupported_token_type: the provider does not revoke this kind; nothing more to do for it.
      if (!(error instanceof oidc.ResponseBodyError && error.error === 'unsupported_token_type'))
        throw await recordFailure(db, accountId, error);
    }
    await db.query(
      kind === 'refresh'
        ? sql.unsafe`update partner_token_revocations set refresh_token_sealed = null where account_id = ${accountId}`
        : sql.unsafe`update partner_token_revocations set access_token_sealed = null where account_id = ${accountId}`,
    );
  }
  await db.query(sql.unsafe`delete from partner_token_revocations where account_id = ${accountId}`);
  return 'revoked';
}

async function recordFailure(db: DatabasePool, accountId: string, error: unknown): Promise<Error> {
  const failure = providerFailure(error, 'token');
  await db.query(
    sql.unsafe`update partner_token_revocations set last_error = ${failure.message.slice(0, 500)} where account_id = ${accountId}`,
  );
  return new Error(`token revocation failed: ${failure.message}`);
}
