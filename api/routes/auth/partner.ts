// Logins through "partner", any OpenID Connect provider with a web client and
// an iOS client:
//   POST /api/auth/partner        web: we exchange the app's code (PKCE) and validate the ID token
//   POST /api/auth/partner-ios    iOS: an ID token issued to the iOS client, checked against the JWKS and nonce
//   POST /api/auth/partner-token  an access token, verified with the provider (introspection, userinfo)
// Each counts against the external-login limit (60 per 15 minutes per IP).
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import * as oidc from 'openid-client';
import { ExternalLoginError, oidcClientsFor, providerFailure } from '../../../core/external-login/clients.ts';
import { LIMITS } from '../../../core/rate-limit.ts';
import { PlatformError, PlatformHttpError } from '../../errors.ts';
import { claimsOf, externalLogin, requireConfigured, viaProvider } from './external.ts';
import { ExternalSession, PartnerIosBody, PartnerTokenBody, PartnerWebBody } from './external-schemas.ts';

const errors = {
  400: PlatformError,
  401: PlatformError,
  403: PlatformError,
  429: PlatformError,
  502: PlatformError,
  503: PlatformError,
};
const ERRORS_TEXT =
  'Errors: 400 invalid_request, invalid_redirect_uri; 401 invalid_code, invalid_id_token, invalid_access_token; ' +
  '403 email_not_verified, email_required, email_unsupported (nothing is created or linked); 429 rate_limited (external-login limit); ' +
  '502 provider_unavailable; 503 auth_method_disabled (names the missing settings).';

const partnerRoutes: FastifyPluginAsyncZod = async (app) => {
  const settings = app.config.externalLogin.partner;
  const clients = oidcClientsFor(app.config);
  const webClient = () => clients.configuration('partner', settings.clientId!, settings.clientAuth);

  /** Exchanges a code our web client's app obtained; returns the person's claims. */
  async function exchangeCode(input: { code: string; redirectUri: string; codeVerifier?: string; nonce?: string }) {
    if (!settings.redirectUris.includes(input.redirectUri)) {
      throw new ExternalLoginError(
        400,
        'invalid_redirect_uri',
        'redirectUri is not one of the redirect URIs this service accepts (PARTNER_REDIRECT_URIS).',
      );
    }
    const config = await webClient();
    const server = config.serverMetadata();
    const current = new URL(input.redirectUri);
    current.searchParams.set('code', input.code);
    // The app checked its own response; a provider that marks responses with iss gets it back here.
    if (server.authorization_response_iss_parameter_supported) current.searchParams.set('iss', server.issuer);
    try {
      const tokens = await oidc.authorizationCodeGrant(config, current, {
        pkceCodeVerifier: input.codeVerifier,
        expectedNonce: input.nonce,
        idTokenExpected: true,
      });
      const idClaims = tokens.claims()!;
      // Some providers put the e-mail only in userinfo.
      if (!idClaims.email && server.userinfo_endpoint)
        return { ...(await oidc.fetchUserInfo(config, tokens.access_token, idClaims.sub)), ...idClaims };
      return idClaims;
    } catch (error) {
      throw providerFailure(error, 'code');
    }
  }

  app.post(
    '/api/auth/partner',
    {
      onRequest: app.rateLimit(LIMITS.externalLogin),
      schema: {
        operationId: 'loginWithPartner',
        security: [],
        tags: ['auth'],
        summary: 'Web login via partner: exchanges the authorization code (PKCE) and validates the ID token',
        description: `The web app ran the authorization request (with PKCE, and a nonce if it likes) and got a code at one of PARTNER_REDIRECT_URIS. ${ERRORS_TEXT}`,
        body: PartnerWebBody,
        response: { 200: ExternalSession, ...errors },
      },
    },
    async (request) => {
      requireConfigured(app, 'partner-web');
      const claims = await viaProvider(() => exchangeCode(request.body));
      return externalLogin(app, claimsOf('partner', claims));
    },
  );

  app.post(
    '/api/auth/partner-ios',
    {
      onRequest: app.rateLimit(LIMITS.externalLogin),
      schema: {
        operationId: 'loginWithPartnerIos',
        security: [],
        tags: ['auth'],
        summary: 'iOS login via partner: an ID token issued to the iOS client id, with its nonce',
        description: `The ID token is checked against the provider's published keys: issuer, audience PARTNER_IOS_CLIENT_ID, expiry and nonce. An optional serverAuthCode is exchanged with the web client and must name the same person. ${ERRORS_TEXT}`,
        body: PartnerIosBody,
        response: { 200: ExternalSession, ...errors },
      },
    },
    async (request) => {
      requireConfigured(app, 'partner-ios');
      const body = request.body;
      const payload = await viaProvider(() =>
        clients.verifyIdToken('partner', body.idToken, { audiences: [settings.iosClientId!], nonce: body.nonce }),
      );
      if (body.serverAuthCode) {
        requireConfigured(app, 'partner-web');
        if (!body.redirectUri)
          throw new PlatformHttpError(
            400,
            'invalid_request',
            'serverAuthCode needs the redirectUri it was issued for.',
          );
        const exchanged = await viaProvider(() =>
          exchangeCode({ code: body.serverAuthCode!, redirectUri: body.redirectUri!, codeVerifier: body.codeVerifier }),
        );
        if (exchanged.sub !== payload.sub)
          throw new PlatformHttpError(
            401,
            'invalid_code',
            'The server auth code belongs to another person than the ID token.',
          );
      }
      return externalLogin(app, claimsOf('partner', payload));
    },
  );

  app.post(
    '/api/auth/partner-token',
    {
      onRequest: app.rateLimit(LIMITS.externalLogin),
      schema: {
        operationId: 'loginWithPartnerToken',
        security: [],
        tags: ['auth'],
        summary: 'Verify a partner access token with the provider and return a platform JWT',
        description:
          "The token is never trusted by decoding: when the provider offers token introspection, it must be active and issued to PARTNER_CLIENT_ID or PARTNER_IOS_CLIENT_ID; the person's identity comes from the provider's userinfo endpoint. " +
          ERRORS_TEXT,
        body: PartnerTokenBody,
        response: { 200: ExternalSession, ...errors },
      },
    },
    async (request) => {
      requireConfigured(app, 'partner-token');
      const accessToken = request.body.accessToken;
      const profile = await viaProvider(async () => {
        const config = await webClient();
        const server = config.serverMetadata();
        try {
          if (server.introspection_endpoint && settings.clientAuth) {
            const info = await oidc.tokenIntrospection(config, accessToken);
            const ours = [settings.clientId, settings.iosClientId].filter(Boolean);
            if (!info.active)
              throw new ExternalLoginError(
                401,
                'invalid_access_token',
                'The provider says this access token is not active.',
              );
            if (!ours.includes(String(info.client_id)))
              throw new ExternalLoginError(
                401,
                'invalid_access_token',
                "The access token was issued to another application, not to this service's clients.",
              );
          }
          if (!server.userinfo_endpoint)
            throw new ExternalLoginError(502, 'provider_unavailable', 'The provider has no userinfo endpoint.');
          return await oidc.fetchUserInfo(config, accessToken, oidc.skipSubjectCheck);
        } catch (error) {
          throw providerFailure(error, 'token');
        }
      });
      return externalLogin(app, claimsOf('partner', profile));
    },
  );
};

export default partnerRoutes;
