// What the connect flow, the token use and the revocation job share: the
// partner client (shared with the partner login: discovery is cached per
// process), the sealing of tokens bound to their account, and the error
// every step reports in.
import type * as oidc from 'openid-client';
import type { Config } from '../config.ts';
import type { Keyring } from '../crypto/keyring.ts';
import { oidcClientsFor } from '../external-login/clients.ts';

export class PartnerAccountError extends Error {
  override name = 'PartnerAccountError';
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** The openid-client Configuration of our confidential partner client (the same one the partner login uses). */
export function partnerClient(config: Config): Promise<oidc.Configuration> {
  const partner = config.externalLogin.partner;
  return oidcClientsFor(config).configuration('partner', partner.clientId!, partner.clientAuth);
}

export type TokenKind = 'access' | 'refresh';

/** Associated data: a sealed token opens only as this account's token of this kind. */
const aad = (accountId: string, kind: TokenKind) => `partner-account|${accountId}|${kind}`;

export function sealToken(keyring: Keyring, accountId: string, kind: TokenKind, token: string): string {
  return keyring.sealPacked(token, aad(accountId, kind));
}

export function openToken(keyring: Keyring, accountId: string, kind: TokenKind, sealed: string): string {
  return keyring.openPacked(sealed, aad(accountId, kind));
}
