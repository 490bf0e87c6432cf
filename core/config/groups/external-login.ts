// The two external OpenID Connect providers people log in with. Each is off
// until its settings are given; its routes then answer 503
// auth_method_disabled naming what is missing (core/external-login/settings.ts).
import { z } from 'zod';
import { group, setting } from '../declare.ts';
import { commaList, issuerUrl, oauthScopes, privateJwk, redirectUris } from '../parsers.ts';

const clientId = z.string().min(1).max(500);
const off = 'unset (off)';

export const externalLogin = group(
  'External identity providers',
  'Which login needs which setting: [Logins through external identity providers](accounts-and-tenants.md#logins-through-external-identity-providers-partner-altidp); connected accounts: [Connected partner accounts](partner-connections.md).',
  {
    PARTNER_ISSUER: setting(issuerUrl, {
      shown: off,
      doc: "The partner provider's issuer URL (https; http only on a loopback address)",
    }),
    PARTNER_CLIENT_ID: setting(clientId, {
      shown: off,
      doc: "The partner web client's id (also the confidential client of connected accounts)",
    }),
    PARTNER_CLIENT_SECRET: setting(z.string().min(1), {
      shown: off,
      doc: "That client's secret at the token endpoint (`client_secret_post` where offered, else Basic)",
    }),
    PARTNER_CLIENT_PRIVATE_KEY: setting(privateJwk, {
      shown: off,
      doc: 'A private JWK as JSON for `private_key_jwt`, used instead of `PARTNER_CLIENT_SECRET`',
    }),
    PARTNER_IOS_CLIENT_ID: setting(clientId, {
      shown: off,
      doc: "The iOS client's id: the audience of the ID tokens the app sends",
    }),
    PARTNER_REDIRECT_URIS: setting(redirectUris, {
      shown: 'none',
      doc: 'Comma-separated redirect URIs your web app uses; a code issued for any other is refused',
    }),
    PARTNER_CONNECT_REDIRECT_URI: setting(z.url({ protocol: /^https?$/ }), {
      shown: '`BASE_URL/oauth/partner/callback`',
      doc: 'The redirect URI of connected accounts; register it at the provider',
    }),
    ALTIDP_ISSUER: setting(issuerUrl, {
      shown: off,
      doc: "The altidp provider's issuer URL (https; http only on a loopback address)",
    }),
    ALTIDP_CLIENT_ID: setting(clientId, {
      shown: off,
      doc: 'Its client id: the audience of identity tokens and notifications',
    }),
    ALTIDP_CLIENT_SECRET: setting(z.string().min(1), {
      shown: off,
      doc: "The client's secret for the redirect login's code exchange",
    }),
    ALTIDP_CLIENT_PRIVATE_KEY: setting(privateJwk, {
      shown: off,
      doc: 'A private JWK as JSON for `private_key_jwt`, used instead of `ALTIDP_CLIENT_SECRET`',
    }),
    ALTIDP_APP_CLIENT_IDS: setting(commaList, {
      shown: 'none',
      doc: "Further audiences accepted for direct logins, comma-separated (your native app's id)",
    }),
    ALTIDP_SCOPES: setting(oauthScopes, {
      default: 'openid email',
      doc: 'Scopes the redirect login asks for, space-separated',
    }),
    ALTIDP_REDIRECT_URI: setting(z.url({ protocol: /^https?$/ }), {
      shown: '`BASE_URL/api/auth/altidp/callback`',
      doc: "The redirect login's callback; register it at the provider",
    }),
  },
);
