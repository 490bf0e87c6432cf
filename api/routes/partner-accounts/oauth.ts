// The connect flow of partner accounts (spec: External OAuth):
//   GET|POST /oauth/partner/start     signed-in person: 302 to the provider (GET) or {authorizationUrl, flowId} (POST)
//   GET      /oauth/partner/services  the service catalog (no auth)
//   GET      /oauth/partner/callback  the provider's redirect: code exchanged, tokens sealed, a page for the person
//   GET      /oauth/partner/status    pending | completed | failed, pollable by flow id (no auth, no tokens)
// "Optional" auth of start, decided: a platform JWT is required (401
// without). The connection belongs to that person and workspace; the start
// also sets a cookie, and only the browser holding it can finish the flow.
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import * as oidc from 'openid-client';
import { z } from 'zod';
import { Keyring } from '../../../core/crypto/keyring.ts';
import { sql } from '../../../core/db/pool.ts';
import { ExternalLoginError, providerFailure } from '../../../core/external-login/clients.ts';
import { storeGrant } from '../../../core/partner-accounts/accounts.ts';
import { catalogByCategory, scopeFor, SERVICES, type ServiceId } from '../../../core/partner-accounts/catalog.ts';
import { partnerClient } from '../../../core/partner-accounts/client.ts';
import {
  CONNECT_FLOW_TTL_S,
  connectFlowStatus,
  finishConnectFlow,
  startConnectFlow,
  takeConnectFlow,
} from '../../../core/partner-accounts/flows.ts';
import type { RateLimitRule } from '../../../core/rate-limit.ts';
import { PlatformError, PlatformHttpError } from '../../errors.ts';
import { OptionalTenantHeaders } from '../../plugins/tenant.ts';
import { browserBinding, providerErrorWord } from '../auth/browser-binding.ts';
import { requireConfigured, viaProvider } from '../auth/external.ts';
import {
  CallbackQuery,
  FlowStatus,
  ServiceCatalog,
  StartBody,
  StartedFlow,
  StartQuery,
  StatusQuery,
} from './schemas.ts';
import { resultPage, wantsPage } from './page.ts';

const binding = browserBinding({
  cookie: 'partner_connect',
  path: '/oauth/partner',
  ttlS: CONNECT_FLOW_TTL_S,
  sameSite: 'Lax',
});
/** Starting writes a flow row: bounded per IP. */
const START_LIMIT: RateLimitRule = { bucket: 'partner-connect-start', limit: 60, windowMs: 15 * 60_000 };
const DEFAULT_SERVICES: ServiceId[] = SERVICES.filter((s) => s.category === 'Core').map((s) => s.id);
const START_ERRORS =
  'Errors: 400 invalid_request; 401 unauthorized (no platform token); 403 forbidden (needs the Admin role in the workspace); 404 not_found / workspace_not_found; ' +
  '429 rate_limited; 502 provider_unavailable; 503 auth_method_disabled (names the missing settings).';

const GrantedScopes = z.object({ granted_scopes: z.array(z.string()) });

const oauthRoutes: FastifyPluginAsyncZod = async (app) => {
  const settings = app.config.externalLogin.partner;
  const keyring = Keyring.fromConfig(app.config);
  const client = () => viaProvider(() => partnerClient(app.config));
  const errors = {
    400: PlatformError,
    401: PlatformError,
    403: PlatformError,
    404: PlatformError,
    429: PlatformError,
    502: PlatformError,
    503: PlatformError,
  };
  const signedIn = {
    onRequest: [app.rateLimit(START_LIMIT), app.requireUser],
    preValidation: app.requireWorkspace('admin'),
  };

  /** Creates the flow and its authorization URL; sets the browser cookie on the reply. */
  async function start(request: FastifyRequest, reply: FastifyReply, services: ServiceId[] | undefined) {
    requireConfigured(app, 'partner-connect');
    const config = await client();
    const chosen = [...new Set(services ?? DEFAULT_SERVICES)];
    const tenantId = request.tenant!.id;
    const userId = request.user!.userId;
    // Incremental: the scopes this person's accounts here already hold are asked for again, so the new grant keeps them.
    const granted = await app.db.anyFirst(sql.type(GrantedScopes)`
      select granted_scopes from partner_accounts where tenant_id = ${tenantId} and user_id = ${userId} and state <> 'revoked'`);
    const scope = scopeFor(chosen, granted.flat());
    const flow = await startConnectFlow(app.db, keyring, {
      tenantId,
      userId,
      services: chosen,
      browserToken: binding.bind(request, reply),
    });
    const url = oidc.buildAuthorizationUrl(config, {
      redirect_uri: settings.connectRedirectUri,
      response_type: 'code',
      scope,
      state: flow.state,
      code_challenge: flow.codeChallenge,
      code_challenge_method: 'S256',
      // A refresh token (offline_access) needs the person's explicit consent.
      prompt: 'consent',
      include_granted_scopes: 'true',
    });
    reply.header('cache-control', 'no-store');
    request.log.info({ flowId: flow.flowId, services: chosen }, 'partner connect flow started');
    return {
      flowId: flow.flowId,
      authorizationUrl: url.href,
      services: chosen,
      scope,
      expiresAt: new Date(Date.now() + CONNECT_FLOW_TTL_S * 1000).toISOString(),
    };
  }

  app.get(
    '/oauth/partner/start',
    {
      ...signedIn,
      schema: {
        operationId: 'startPartnerConnectRedirect',
        tags: ['partner-accounts'],
        summary: 'Start connecting a partner account: 302 to the provider',
        description:
          'Needs a platform token (a signed-in page); the connection belongs to the caller and the workspace (x-tenant-id, or the default workspace). ' +
          'Sets a cookie that binds the flow to this browser. The provider returns to /oauth/partner/callback. ' +
          START_ERRORS,
        security: [{ PlatformJWT: [] }],
        headers: OptionalTenantHeaders,
        querystring: StartQuery,
        response: { 302: z.undefined().describe('Redirect to the provider'), ...errors },
      },
    },
    async (request, reply) => {
      const services = request.query.services?.split(',');
      const unknown = services?.filter((id) => !SERVICES.some((s) => s.id === id)) ?? [];
      if (unknown.length > 0)
        throw new PlatformHttpError(
          400,
          'invalid_request',
          `Unknown services: ${unknown.join(', ')} (see GET /oauth/partner/services).`,
        );
      const started = await start(request, reply, services as ServiceId[] | undefined);
      return reply.code(302).header('location', started.authorizationUrl).send(undefined);
    },
  );

  app.post(
    '/oauth/partner/start',
    {
      ...signedIn,
      schema: {
        operationId: 'startPartnerConnect',
        tags: ['partner-accounts'],
        summary: 'Start connecting a partner account: the authorization URL and the flow id to poll',
        description:
          "Needs a platform token; the connection belongs to the caller and the workspace. Open authorizationUrl in the browser that made this request (it carries the flow's cookie) and poll GET /oauth/partner/status. " +
          START_ERRORS,
        security: [{ PlatformJWT: [] }],
        headers: OptionalTenantHeaders,
        body: StartBody.optional(),
        response: { 200: StartedFlow, ...errors },
      },
    },
    async (request, reply) => start(request, reply, request.body?.services),
  );

  app.get(
    '/oauth/partner/services',
    {
      schema: {
        operationId: 'listPartnerServices',
        security: [],
        tags: ['partner-accounts'],
        summary:
          'The services a partner account can be connected for, by category (Core, Communication, Location, Specialized)',
        response: { 200: ServiceCatalog },
      },
    },
    async (_request, reply) => {
      reply.header('cache-control', 'public, max-age=300');
      return { count: SERVICES.length, categories: catalogByCategory() };
    },
  );

  app.get(
    '/oauth/partner/callback',
    {
      schema: {
        operationId: 'partnerConnectCallback',
        security: [],
        tags: ['partner-accounts'],
        summary: "The provider's redirect after the person grants or denies access; answers a page for the person",
        description:
          'Checks the state (unknown, expired, used, or from another browser: 400 invalid_state, nothing stored), exchanges the code (PKCE), seals the tokens, records the granted scopes per service and marks the flow completed or failed. ' +
          'Answers an HTML page (done / not connected; the window may be closed); a client that asks for JSON gets the platform error shape for refusals.',
        querystring: CallbackQuery,
        response: {
          200: {
            description: 'The account is connected (HTML page)',
            content: { 'text/html': { schema: z.string() } },
          },
          400: PlatformError,
          502: PlatformError,
          503: PlatformError,
        },
      },
    },
    async (request, reply) => {
      const page = wantsPage(request);
      const refuse = (status: number, code: string, message: string) => {
        if (page) return resultPage(reply, status, false, message);
        throw new PlatformHttpError(status, code, message);
      };
      try {
        requireConfigured(app, 'partner-connect');
      } catch (error) {
        return refuse(503, 'auth_method_disabled', (error as Error).message);
      }
      const query = request.query;
      if (!query.state)
        return refuse(
          400,
          'invalid_state',
          'This page needs the state the provider sends back; start connecting again.',
        );
      const taken = await takeConnectFlow(app.db, keyring, query.state, binding.read(request));
      if ('error' in taken) {
        request.log.warn({ reason: taken.error, flowId: taken.flowId }, 'partner connect callback refused');
        return refuse(
          400,
          'invalid_state',
          taken.error === 'other_browser'
            ? 'This connection was started in another browser; start it again here.'
            : 'This connection link is unknown, expired or already used; start connecting again.',
        );
      }
      const { flow } = taken;
      const fail = async (reason: string, message: string, status = 400) => {
        await finishConnectFlow(app.db, flow.id, { status: 'failed', reason });
        request.log.warn({ flowId: flow.id, reason }, 'partner connect failed');
        return refuse(status, reason, message);
      };
      if (query.error || !query.code) {
        const reason = providerErrorWord(query.error ?? 'invalid_request', 'authorization_failed');
        return fail(
          reason,
          reason === 'access_denied'
            ? 'Access was not granted, so nothing was connected.'
            : `The provider answered ${reason}; nothing was connected.`,
        );
      }
      let accountId: string;
      try {
        const config = await partnerClient(app.config);
        const current = new URL(settings.connectRedirectUri);
        for (const name of ['code', 'state', 'iss'] as const)
          if (query[name]) current.searchParams.set(name, query[name]!);
        let tokens;
        try {
          tokens = await oidc.authorizationCodeGrant(config, current, {
            pkceCodeVerifier: flow.codeVerifier,
            expectedState: query.state,
            idTokenExpected: true,
          });
        } catch (error) {
          throw providerFailure(error, 'code');
        }
        const claims = tokens.claims()!;
        const granted = (tokens.scope ?? '').split(' ').filter(Boolean);
        accountId = await app.db.transaction(async (tx) => {
          const id = await storeGrant(tx, keyring, {
            tenantId: flow.tenantId,
            userId: flow.userId,
            subject: String(claims.sub),
            email: typeof claims.email === 'string' ? claims.email : null,
            services: flow.services,
            grantedScopes: granted.length > 0 ? granted : scopeFor(flow.services).split(' '),
            accessToken: tokens.access_token,
            refreshToken: tokens.refresh_token ?? null,
            expiresInS: tokens.expires_in ?? null,
          });
          await finishConnectFlow(tx, flow.id, { status: 'completed', accountId: id });
          return id;
        });
      } catch (error) {
        if (!(error instanceof ExternalLoginError)) throw error;
        return fail(
          error.code,
          `The provider's answer could not be used (${error.code}); nothing was connected.`,
          error.status >= 500 ? 502 : 400,
        );
      }
      request.log.info({ flowId: flow.id, accountId }, 'partner account connected');
      return resultPage(reply, 200, true, 'Your account is connected. You can close this window.');
    },
  );

  app.get(
    '/oauth/partner/status',
    {
      schema: {
        operationId: 'getPartnerConnectStatus',
        security: [],
        tags: ['partner-accounts'],
        summary: 'Status of a connect flow: pending, completed or failed (with the reason); no tokens',
        querystring: StatusQuery,
        response: { 200: FlowStatus, 400: PlatformError, 404: PlatformError },
      },
    },
    async (request, reply) => {
      const row = await connectFlowStatus(app.db, request.query.flow);
      if (!row) throw new PlatformHttpError(404, 'not_found', 'No such connect flow.');
      reply.header('cache-control', 'no-store');
      return {
        flowId: request.query.flow,
        status: row.status,
        reason: row.reason,
        services: row.services,
        accountId: row.account_id,
        createdAt: row.created_at,
        finishedAt: row.finished_at,
      };
    },
  );
};

export default oauthRoutes;
