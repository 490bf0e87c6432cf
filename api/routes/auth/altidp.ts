// Logins through "altidp", any OpenID Connect provider used with
// response_mode=form_post:
//   GET  /api/auth/altidp/start/        302 to the provider (state, nonce, PKCE kept server-side)
//   POST /api/auth/altidp/callback      the provider's form post: code exchanged, 303 to `next` with a ticket
//   POST /api/auth/altidp/result/       the ticket, once, for the login payload
//   POST /api/auth/altidp               a native app's identity token
//   POST /api/auth/altidp/notifications signed server-to-server notifications (applied by a job)
// The browser that starts a flow gets a cookie; only that browser can finish
// it, so nobody can slip their own login into someone else's browser.
import formbody from '@fastify/formbody';
import type { FastifyReply } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import * as oidc from 'openid-client';
import { z } from 'zod';
import { issueRefreshToken } from '../../../core/accounts/refresh-tokens.ts';
import { findUser } from '../../../core/accounts/users.ts';
import { Keyring } from '../../../core/crypto/keyring.ts';
import { signInExternal } from '../../../core/external-login/accounts.ts';
import {
  consumeLoginTicket,
  createLoginTicket,
  FLOW_TTL_S,
  safeNextPath,
  startAltidpFlow,
  takeAltidpFlow,
} from '../../../core/external-login/altidp-flows.ts';
import { eventOf, storeNotification } from '../../../core/external-login/altidp-notifications.ts';
import { ExternalLoginError, oidcClientsFor, providerFailure } from '../../../core/external-login/clients.ts';
import { LIMITS, type RateLimitRule } from '../../../core/rate-limit.ts';
import { PlatformError, PlatformHttpError } from '../../errors.ts';
import { browserBinding, providerErrorWord } from './browser-binding.ts';
import { storableJson } from '../../../core/storable.ts';
import { assertStorableIdentity, claimsOf, externalLogin, requireConfigured, viaProvider } from './external.ts';
import {
  AltidpCallbackBody,
  AltidpDirectBody,
  AltidpNotificationBody,
  AltidpResult,
  AltidpResultBody,
  AltidpStartQuery,
  ExternalSession,
  NotificationReceived,
} from './external-schemas.ts';
import { sessionPayload } from './session.ts';

/** Starting a flow writes a row: bounded per IP, apart from the login limit (a start is no attempt). */
const START_LIMIT: RateLimitRule = { bucket: 'altidp-start', limit: 60, windowMs: 15 * 60_000 };
const errors = {
  400: PlatformError,
  401: PlatformError,
  403: PlatformError,
  429: PlatformError,
  502: PlatformError,
  503: PlatformError,
};

// SameSite=None: the provider's form post is a cross-site request and must carry it.
const binding = browserBinding({
  cookie: 'altidp_browser',
  path: '/api/auth/altidp',
  ttlS: FLOW_TTL_S,
  sameSite: 'None',
});

const altidpRoutes: FastifyPluginAsyncZod = async (app) => {
  if (!app.hasContentTypeParser('application/x-www-form-urlencoded'))
    await app.register(formbody, { bodyLimit: 16_384 });
  const settings = app.config.externalLogin.altidp;
  const clients = oidcClientsFor(app.config);
  const keyring = Keyring.fromConfig(app.config);
  const client = () => clients.configuration('altidp', settings.clientId!, settings.clientAuth);
  const back = (reply: FastifyReply, nextPath: string, fragment: Record<string, string>) =>
    reply
      .code(303)
      .header('location', `${app.config.baseUrl}${nextPath}#${new URLSearchParams(fragment)}`)
      .header('cache-control', 'no-store')
      .send();

  app.get(
    '/api/auth/altidp/start/',
    {
      onRequest: app.rateLimit(START_LIMIT),
      schema: {
        operationId: 'startAltidpLogin',
        security: [],
        tags: ['auth'],
        summary: 'Start the altidp redirect login: 302 to the provider',
        description:
          'Sets a cookie binding the flow to this browser and redirects to the provider (response_mode=form_post, state, nonce, PKCE S256). ' +
          'The provider posts back to /api/auth/altidp/callback, which redirects to `next` with `#altidp_ticket=<ticket>` (or `#altidp_error=<code>`). ' +
          'Errors: 400 invalid_request, invalid_next (not a path on this service); 429 rate_limited; 502 provider_unavailable; 503 auth_method_disabled.',
        querystring: AltidpStartQuery,
        response: { 302: z.undefined().describe('Redirect to the provider'), ...errors },
      },
    },
    async (request, reply) => {
      requireConfigured(app, 'altidp-redirect');
      const nextPath = safeNextPath(request.query.next, app.config.baseUrl);
      if (!nextPath)
        throw new PlatformHttpError(400, 'invalid_next', '`next` must be a path on this service, such as /welcome.');
      const config = await viaProvider(client);
      const flow = await startAltidpFlow(app.db, keyring, {
        mode: request.query.mode,
        nextPath,
        browserToken: binding.bind(request, reply),
      });
      const url = oidc.buildAuthorizationUrl(config, {
        redirect_uri: settings.redirectUri,
        response_type: 'code',
        response_mode: 'form_post',
        scope: settings.scopes,
        state: flow.state,
        nonce: flow.nonce,
        code_challenge: flow.codeChallenge,
        code_challenge_method: 'S256',
      });
      return reply.code(302).header('location', url.href).header('cache-control', 'no-store').send(undefined);
    },
  );

  app.post(
    '/api/auth/altidp/callback',
    {
      onRequest: app.rateLimit(LIMITS.externalLogin),
      schema: {
        operationId: 'altidpCallback',
        security: [],
        tags: ['auth'],
        summary: "The provider's form post: exchanges the code and redirects to `next` with a short-lived ticket",
        description:
          'Form fields as the provider posts them: code, state, iss, and on the first sign-in `user` (JSON with the name). ' +
          'A state that is unknown, expired, already used or started in another browser is 400 invalid_state. ' +
          'Otherwise the browser goes to `next`: `#altidp_ticket=<ticket>` (single use, 60 s, trade it at /api/auth/altidp/result/) ' +
          'or `#altidp_error=<code>` (access_denied, invalid_code, invalid_id_token, email_not_verified, email_required, email_unsupported, provider_unavailable).',
        consumes: ['application/x-www-form-urlencoded'],
        body: AltidpCallbackBody,
        response: {
          303: z.undefined().describe('Redirect to `next` with the ticket or the error in the fragment'),
          ...errors,
        },
      },
    },
    async (request, reply) => {
      requireConfigured(app, 'altidp-redirect');
      const form = request.body;
      const taken = await takeAltidpFlow(app.db, keyring, form.state, binding.read(request));
      if ('error' in taken) {
        request.log.warn({ reason: taken.error }, 'altidp callback refused');
        throw new PlatformHttpError(
          400,
          'invalid_state',
          taken.error === 'other_browser'
            ? 'This sign-in was started in another browser; start it again here.'
            : 'This sign-in is unknown, expired or already finished; start it again.',
        );
      }
      const { flow } = taken;
      if (form.error || !form.code)
        return back(reply, flow.nextPath, {
          altidp_error: providerErrorWord(form.error ?? 'invalid_request', 'login_failed'),
        });
      try {
        const config = await client();
        const current = new URL(settings.redirectUri);
        for (const name of ['code', 'state', 'iss'] as const)
          if (form[name]) current.searchParams.set(name, form[name]!);
        let tokens;
        try {
          tokens = await oidc.authorizationCodeGrant(config, current, {
            pkceCodeVerifier: flow.codeVerifier,
            expectedState: form.state,
            expectedNonce: flow.nonce,
            idTokenExpected: true,
          });
        } catch (error) {
          throw providerFailure(error, 'code');
        }
        const claims = claimsOf('altidp', tokens.claims()!, nameFromUserField(form.user));
        assertStorableIdentity(claims);
        const ticket = await app.db.transaction(async (tx) => {
          const signedIn = await signInExternal(tx, claims);
          return createLoginTicket(tx, { userId: signedIn.user.id, mode: flow.mode, newUser: signedIn.newUser });
        });
        request.log.info({ mode: flow.mode }, 'altidp callback: ticket issued');
        return back(reply, flow.nextPath, { altidp_ticket: ticket });
      } catch (error) {
        if (!(error instanceof ExternalLoginError)) throw error;
        request.log.warn({ code: error.code, reason: error.message }, 'altidp callback: login failed');
        return back(reply, flow.nextPath, { altidp_error: error.code });
      }
    },
  );

  app.post(
    '/api/auth/altidp/result/',
    {
      schema: {
        operationId: 'altidpLoginResult',
        security: [],
        tags: ['auth'],
        summary: 'Trade the ticket from the callback for the login payload (once)',
        description: 'Errors: 400 invalid_ticket (unknown, expired after 60 s, or already used).',
        body: AltidpResultBody,
        response: { 200: AltidpResult, 400: PlatformError },
      },
    },
    async (request) => {
      const done = await app.db.transaction(async (tx) => {
        const row = await consumeLoginTicket(tx, request.body.ticket);
        if (!row) return null;
        const user = await findUser(tx, row.user_id);
        return user ? { row, user, refreshToken: await issueRefreshToken(tx, user.id) } : null;
      });
      if (!done)
        throw new PlatformHttpError(
          400,
          'invalid_ticket',
          'The ticket is unknown, expired or already used; sign in again.',
        );
      return {
        ...(await sessionPayload(app, done.user, done.refreshToken)),
        newUser: done.row.new_user,
        mode: done.row.mode,
      };
    },
  );

  app.post(
    '/api/auth/altidp',
    {
      onRequest: app.rateLimit(LIMITS.externalLogin),
      schema: {
        operationId: 'loginWithAltidp',
        security: [],
        tags: ['auth'],
        summary: "Direct login with altidp's identity token (native apps)",
        description:
          "The token is checked against the provider's published keys: issuer, audience ALTIDP_CLIENT_ID (or one of ALTIDP_APP_CLIENT_IDS), expiry, and the nonce when either side has one. " +
          'Errors: 400 invalid_request; 401 invalid_id_token; 403 email_not_verified, email_required, email_unsupported; 429 rate_limited; 502 provider_unavailable; 503 auth_method_disabled.',
        body: AltidpDirectBody,
        response: { 200: ExternalSession, ...errors },
      },
    },
    async (request) => {
      requireConfigured(app, 'altidp-token');
      const { identityToken, nonce, name } = request.body;
      const payload = await viaProvider(() =>
        clients.verifyIdToken('altidp', identityToken, {
          audiences: [settings.clientId!, ...settings.appClientIds],
          nonce,
        }),
      );
      return externalLogin(app, claimsOf('altidp', payload, name));
    },
  );

  app.post(
    '/api/auth/altidp/notifications',
    {
      schema: {
        operationId: 'receiveAltidpNotification',
        security: [],
        tags: ['auth'],
        summary: "altidp's signed server-to-server notifications (e-mail relay, consent and account changes)",
        description:
          "`payload` is a JWS verified against the provider's published keys (issuer, audience ALTIDP_CLIENT_ID, expiry). Events: email-disabled, email-enabled (recorded on the identity), " +
          'consent-revoked (identity unlinked, refresh tokens revoked), account-delete (the same, and the account is deleted when nothing else signs it in); other types are recorded and ignored. ' +
          'Each notification is stored once and applied by a job. Errors: 400 invalid_signature (nothing stored), invalid_request; 502 provider_unavailable; 503 auth_method_disabled.',
        body: AltidpNotificationBody,
        response: { 200: NotificationReceived, 400: PlatformError, 502: PlatformError, 503: PlatformError },
      },
    },
    async (request) => {
      requireConfigured(app, 'altidp-token');
      const jws = request.body.payload;
      let payload;
      try {
        // Its claims are stored as jsonb: a NUL or a lone surrogate in them is mended.
        payload = storableJson(
          await clients.verifyJwt('altidp', jws, [settings.clientId!], ['iat'], 'invalid_signature', 'notification'),
        );
      } catch (error) {
        if (error instanceof ExternalLoginError && error.status === 401) {
          request.log.warn({ reason: error.message }, 'altidp notification refused');
          throw new PlatformHttpError(400, 'invalid_signature', error.message);
        }
        throw error instanceof ExternalLoginError
          ? new PlatformHttpError(error.status, error.code, error.message)
          : error;
      }
      const event = eventOf(payload);
      if (!event)
        throw new PlatformHttpError(400, 'invalid_request', 'The notification has no readable `events` claim.');
      const stored = await storeNotification(app.db, jws, payload, event);
      request.log.info(
        { type: event.type, notificationId: stored.id, duplicate: stored.duplicate },
        'altidp notification received',
      );
      return { received: true as const, duplicate: stored.duplicate, status: stored.status as 'queued' };
    },
  );
};

/** The name from altidp's first-sign-in `user` field ({"name":{"firstName","lastName"}}). */
function nameFromUserField(user: string | undefined): string | undefined {
  if (!user) return undefined;
  try {
    const parsed = JSON.parse(user) as { name?: { firstName?: unknown; lastName?: unknown } };
    const parts = [parsed.name?.firstName, parsed.name?.lastName].filter(
      (p): p is string => typeof p === 'string' && p.trim() !== '',
    );
    return parts.length > 0 ? parts.join(' ').slice(0, 200) : undefined;
  } catch {
    return undefined;
  }
}

export default altidpRoutes;
