// Settings of the two external OpenID Connect providers people log in with.
// "partner" is any OIDC provider with a web client and an iOS client;
// "altidp" is any OIDC provider used with response_mode=form_post and signed
// server-to-server notifications. Each is off until its settings are given;
// its routes then answer 503 auth_method_disabled naming what is missing.
// The variables (PARTNER_*, ALTIDP_*) are declared in
// core/config/groups/external-login.ts; config.externalLogin holds them.

export type ExternalProvider = 'partner' | 'altidp';

/** How our server authenticates to the provider's token endpoint. */
export type ClientAuthSetting =
  | { kind: 'secret'; secret: string }
  | { kind: 'private_key'; jwk: Record<string, unknown> };

export type PartnerSettings = {
  issuer?: string;
  clientId?: string;
  clientAuth?: ClientAuthSetting;
  iosClientId?: string;
  /** Redirect URIs the web app may have used; a code exchange for any other is refused. */
  redirectUris: string[];
  /** Where the provider returns after a connected-account grant (/oauth/partner/callback); register it at the provider. */
  connectRedirectUri: string;
};

export type AltidpSettings = {
  issuer?: string;
  clientId?: string;
  clientAuth?: ClientAuthSetting;
  /** Further audiences accepted for direct identity tokens (a native app's own client id). */
  appClientIds: string[];
  scopes: string;
  redirectUri: string;
};

export type ExternalLoginSettings = { partner: PartnerSettings; altidp: AltidpSettings };

/** What each kind of login needs; the names of the settings still missing. */
export type LoginKind =
  | 'partner-web'
  | 'partner-ios'
  | 'partner-token'
  | 'partner-connect'
  | 'altidp-redirect'
  | 'altidp-token';

export function missingSettings(settings: ExternalLoginSettings, kind: LoginKind): string[] {
  const missing: string[] = [];
  if (kind.startsWith('partner')) {
    const p = settings.partner;
    if (!p.issuer) missing.push('PARTNER_ISSUER');
    if (kind === 'partner-ios') {
      if (!p.iosClientId) missing.push('PARTNER_IOS_CLIENT_ID');
      return missing;
    }
    if (!p.clientId) missing.push('PARTNER_CLIENT_ID');
    if (kind === 'partner-web') {
      if (!p.clientAuth) missing.push('PARTNER_CLIENT_SECRET (or PARTNER_CLIENT_PRIVATE_KEY)');
      if (p.redirectUris.length === 0) missing.push('PARTNER_REDIRECT_URIS');
    }
    // Connected accounts: a confidential client (code exchange, refresh, revocation) at connectRedirectUri.
    if (kind === 'partner-connect' && !p.clientAuth)
      missing.push('PARTNER_CLIENT_SECRET (or PARTNER_CLIENT_PRIVATE_KEY)');
    return missing;
  }
  const a = settings.altidp;
  if (!a.issuer) missing.push('ALTIDP_ISSUER');
  if (!a.clientId) missing.push('ALTIDP_CLIENT_ID');
  if (kind === 'altidp-redirect' && !a.clientAuth) missing.push('ALTIDP_CLIENT_SECRET (or ALTIDP_CLIENT_PRIVATE_KEY)');
  return missing;
}
