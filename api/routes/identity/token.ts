// POST {auth_url}/oauth2/token: the RFC 7523 JWT-bearer grant. The agent
// sends its assertion and the RFC 8707 resource it wants a token for; the
// access token it gets back lives about five minutes and is never stored.
import formbody from '@fastify/formbody';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { agentContext } from '../../../core/agent/capabilities.ts';
import {
  RejectedTokenError,
  resources,
  scopesFor,
  signAccessToken,
  UndecodableTokenError,
  verifyAssertion,
} from '../../../core/identity/tokens.ts';
import { IdentityHttpError } from '../../errors.ts';

export const JWT_BEARER = 'urn:ietf:params:oauth:grant-type:jwt-bearer';

const TokenError = z
  .object({ code: z.string(), message: z.string(), error: z.string(), error_description: z.string() })
  .meta({ id: 'TokenError', description: 'Identity provider error body with the standard OAuth fields' });
const TokenResponse = z
  .object({
    access_token: z.string(),
    token_type: z.literal('Bearer'),
    expires_in: z.int(),
    scope: z.string().describe('Space-separated; follows the claim state'),
  })
  .meta({ id: 'TokenResponse' });

const single = (value: unknown): string | undefined =>
  typeof value === 'string' && value.length > 0 ? value : undefined;

const tokenRoutes: FastifyPluginAsyncZod = async (app) => {
  if (!app.hasContentTypeParser('application/x-www-form-urlencoded'))
    await app.register(formbody, { bodyLimit: 16_384 });
  const { config } = app;
  const known = resources(config.baseUrl);

  app.post(
    '/oauth2/token',
    {
      schema: {
        operationId: 'exchangeToken',
        security: [],
        tags: ['identity'],
        summary: 'Exchange an agent assertion for an access token (JWT-bearer grant, with resource)',
        consumes: ['application/x-www-form-urlencoded'],
        body: z
          .object({
            grant_type: z.unknown().describe(`Must be ${JWT_BEARER}`),
            assertion: z.unknown().describe('The assertion from registration'),
            resource: z.unknown().describe(`${known.agent} or ${known.mcp}`),
            scope: z.unknown().optional().describe('Optional subset of the granted scopes'),
          })
          .partial()
          .loose()
          .nullish(),
        response: { 200: TokenResponse, 400: TokenError },
      },
    },
    async (request, reply) => {
      const form = request.body ?? {};
      const grantType = single(form.grant_type);
      if (!grantType) throw new IdentityHttpError(400, 'invalid_request', 'grant_type is required.');
      if (grantType !== JWT_BEARER)
        throw new IdentityHttpError(400, 'unsupported_grant_type', `Only ${JWT_BEARER} is supported.`);
      const assertion = single(form.assertion);
      if (!assertion) throw new IdentityHttpError(400, 'invalid_request', 'assertion is required.');
      const resource = single(form.resource);
      if (!resource || !(resource === known.agent || resource === known.mcp)) {
        throw new IdentityHttpError(400, 'invalid_target', `resource must be ${known.agent} or ${known.mcp}.`);
      }

      let claims;
      try {
        claims = await verifyAssertion(app.idpKeys, assertion, config.authUrl);
      } catch (error) {
        if (error instanceof UndecodableTokenError)
          throw new IdentityHttpError(400, 'invalid_request', 'The assertion cannot be decoded.');
        if (error instanceof RejectedTokenError)
          throw new IdentityHttpError(
            400,
            'invalid_grant',
            `${error.message}; refresh the registration or register again.`,
          );
        throw error;
      }
      // The registration as the Agent API will check it: live, linked, and the tenant it acts in.
      const registration = await agentContext(app.db, claims.registrationId);
      if (
        registration?.registration_status !== 'active' ||
        registration.principal_id !== claims.principalId ||
        registration.claim_state === 'pending'
      ) {
        throw new IdentityHttpError(
          400,
          'invalid_grant',
          'The registration behind this assertion is revoked or not usable; register again.',
        );
      }
      if (!registration.linked) {
        throw new IdentityHttpError(
          400,
          'invalid_grant',
          'The agent is no longer linked (principal_not_linked: unlinked by a workspace Admin, or its person left the workspace it acts in); register again.',
        );
      }

      let scopes = [...scopesFor(registration.claim_state)];
      const requested = single(form.scope);
      if (requested) {
        const wanted = requested.split(' ').filter(Boolean);
        const unknownScope = wanted.find((s) => !scopes.includes(s as never));
        if (unknownScope)
          throw new IdentityHttpError(
            400,
            'invalid_scope',
            `Scope ${unknownScope} is not granted to this registration.`,
          );
        scopes = scopes.filter((s) => wanted.includes(s));
      }
      const accessToken = await signAccessToken(
        app.idpKeys,
        config.authUrl,
        resource,
        {
          principalId: registration.principal_id,
          registrationId: registration.registration_id,
          tenantId: registration.tenant_id,
          scopes,
        },
        config.identity.accessTokenTtlS,
      );
      reply.header('cache-control', 'no-store').header('pragma', 'no-cache');
      return {
        access_token: accessToken,
        token_type: 'Bearer' as const,
        expires_in: config.identity.accessTokenTtlS,
        scope: scopes.join(' '),
      };
    },
  );
};

export default tokenRoutes;
