// Settings of the two external OpenID Connect providers people log in with.
// "partner" is any OIDC provider with a web client and an iOS client;
// "altidp" is any OIDC provider used with response_mode=form_post and signed
// server-to-server notifications. Each is off until its settings are given;
// its routes then answer 503 auth_method_disabled naming what is missing.
import { z } from 'zod';

export type ExternalProvider = 'partner' | 'altidp';

/** How our server authenticates to the provider's token endpoint. */
export type ClientAuthSetting = { kind: 'secret'; secret: string } | { kind: 'private_key'; jwk: Record<string, unknown> };

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

const isLoopback = (host: string) => host === 'localhost' || host === '[::1]' || /^127\.\d+\.\d+\.\d+$/.test(host);

/** https, or http on a loopback address (a provider running next to us, as in tests). */
export const issuerFromEnv = z
  .url()
  .transform((v) => v.replace(/\/+$/, ''))
  .refine((v) => {
    const url = new URL(v);
    return !url.search && !url.hash && (url.protocol === 'https:' || (url.protocol === 'http:' && isLoopback(url.hostname)));
  }, 'must be an https:// issuer URL without query (http:// only on a loopback address)');

/** A private JWK (JSON) for private_key_jwt client authentication. */
export const privateJwkFromEnv = z.string().transform((v, ctx) => {
  try {
    const jwk = JSON.parse(v) as Record<string, unknown>;
    if (typeof jwk === 'object' && jwk && typeof jwk.kty === 'string' && typeof jwk.d === 'string') return jwk;
  } catch {
    // reported below
  }
  ctx.addIssue({ code: 'custom', message: 'must be a private JWK as JSON ({"kty":...,"d":...,"kid":...})' });
  return z.NEVER;
});

/** Redirect URIs: absolute http(s) URLs without query or fragment (the code exchange sends them bare). */
export const redirectUrisFromEnv = z
  .string()
  .transform((v) => v.split(',').map((s) => s.trim()).filter(Boolean))
  .pipe(z.array(z.url({ protocol: /^https?$/ }).refine((u) => !new URL(u).search && !new URL(u).hash, 'no query or fragment')));

export const externalLoginEnv = {
  PARTNER_ISSUER: issuerFromEnv.optional(),
  PARTNER_CLIENT_ID: z.string().min(1).max(500).optional(),
  PARTNER_CLIENT_SECRET: z.string().min(1).optional(),
  PARTNER_CLIENT_PRIVATE_KEY: privateJwkFromEnv.optional(),
  PARTNER_IOS_CLIENT_ID: z.string().min(1).max(500).optional(),
  PARTNER_REDIRECT_URIS: redirectUrisFromEnv.optional(),
  PARTNER_CONNECT_REDIRECT_URI: z.url({ protocol: /^https?$/ }).optional(),
  ALTIDP_ISSUER: issuerFromEnv.optional(),
  ALTIDP_CLIENT_ID: z.string().min(1).max(500).optional(),
  ALTIDP_CLIENT_SECRET: z.string().min(1).optional(),
  ALTIDP_CLIENT_PRIVATE_KEY: privateJwkFromEnv.optional(),
  ALTIDP_APP_CLIENT_IDS: z
    .string()
    .transform((v) => v.split(',').map((s) => s.trim()).filter(Boolean))
    .optional(),
  ALTIDP_SCOPES: z.string().regex(/^[\x21\x23-\x5b\x5d-\x7e]+( [\x21\x23-\x5b\x5d-\x7e]+)*$/, 'space-separated scope names').default('openid email'),
  ALTIDP_REDIRECT_URI: z.url({ protocol: /^https?$/ }).optional(),
};

type Env = z.output<z.ZodObject<typeof externalLoginEnv>>;

function clientAuth(secret: string | undefined, jwk: Record<string, unknown> | undefined): ClientAuthSetting | undefined {
  if (jwk) return { kind: 'private_key', jwk };
  if (secret) return { kind: 'secret', secret };
  return undefined;
}

export function externalLoginSettings(e: Env, baseUrl: string): ExternalLoginSettings {
  return {
    partner: {
      issuer: e.PARTNER_ISSUER,
      clientId: e.PARTNER_CLIENT_ID,
      clientAuth: clientAuth(e.PARTNER_CLIENT_SECRET, e.PARTNER_CLIENT_PRIVATE_KEY),
      iosClientId: e.PARTNER_IOS_CLIENT_ID,
      redirectUris: e.PARTNER_REDIRECT_URIS ?? [],
      connectRedirectUri: e.PARTNER_CONNECT_REDIRECT_URI ?? `${baseUrl}/oauth/partner/callback`,
    },
    altidp: {
      issuer: e.ALTIDP_ISSUER,
      clientId: e.ALTIDP_CLIENT_ID,
      clientAuth: clientAuth(e.ALTIDP_CLIENT_SECRET, e.ALTIDP_CLIENT_PRIVATE_KEY),
      appClientIds: e.ALTIDP_APP_CLIENT_IDS ?? [],
      scopes: e.ALTIDP_SCOPES,
      redirectUri: e.ALTIDP_REDIRECT_URI ?? `${baseUrl}/api/auth/altidp/callback`,
    },
  };
}

/** What each kind of login needs; the names of the settings still missing. */
export type LoginKind = 'partner-web' | 'partner-ios' | 'partner-token' | 'partner-connect' | 'altidp-redirect' | 'altidp-token';

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
    if (kind === 'partner-connect' && !p.clientAuth) missing.push('PARTNER_CLIENT_SECRET (or PARTNER_CLIENT_PRIVATE_KEY)');
    return missing;
  }
  const a = settings.altidp;
  if (!a.issuer) missing.push('ALTIDP_ISSUER');
  if (!a.clientId) missing.push('ALTIDP_CLIENT_ID');
  if (kind === 'altidp-redirect' && !a.clientAuth) missing.push('ALTIDP_CLIENT_SECRET (or ALTIDP_CLIENT_PRIVATE_KEY)');
  return missing;
}
