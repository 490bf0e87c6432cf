// What the connect flow, the token use and the revocation job share: the
// partner client (one OidcClients per configuration, so discovery is cached
// per process), the sealing of tokens bound to their account, and the error
// every step reports in.
import type * as oidc from 'openid-client';
import type { Config } from '../config.ts';
import type { Keyring } from '../crypto/keyring.ts';
import { OidcClients } from '../external-login/clients.ts';

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

const clients = new WeakMap<Config, OidcClients>();

/** The openid-client Configuration of our confidential partner client (discovered once per process). */
export function partnerClient(config: Config): Promise<oidc.Configuration> {
  let set = clients.get(config);
  if (!set) {
    set = new OidcClients(config.externalLogin);
    clients.set(config, set);
  }
  const partner = config.externalLogin.partner;
  return set.configuration('partner', partner.clientId!, partner.clientAuth);
}

export type TokenKind = 'access' | 'refresh';

/** Associated data: a sealed token opens only as this account's token of this kind. */
const aad = (accountId: string, kind: TokenKind) => `partner-account|${accountId}|${kind}`;

export function sealToken(keyring: Keyring, accountId: string, kind: TokenKind, token: string): string {
  const sealed = keyring.seal(token, aad(accountId, kind));
  return `${sealed.keyId}:${sealed.ciphertext}`;
}

export function openToken(keyring: Keyring, accountId: string, kind: TokenKind, sealed: string): string {
  const at = sealed.indexOf(':');
  return keyring.open(sealed.slice(0, at), sealed.slice(at + 1), aad(accountId, kind));
}
