// Discovery documents: the JWKS and RFC 8414 authorization-server metadata
// on {auth_url}; RFC 9728 protected-resource metadata for the Agent API and
// the MCP endpoint on {base_url}.
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { AGENT_SCOPES, resources, tokenEndpoint } from '../../../core/identity/tokens.ts';
import { JWT_BEARER } from './token.ts';

const Jwks = z.object({ keys: z.array(z.record(z.string(), z.unknown())) }).meta({ id: 'JsonWebKeySet' });
const AuthorizationServerMetadata = z
  .object({
    issuer: z.url(),
    token_endpoint: z.url(),
    jwks_uri: z.url(),
    authorization_endpoint: z.url(),
    grant_types_supported: z.array(z.string()),
    response_types_supported: z.array(z.string()),
    token_endpoint_auth_methods_supported: z.array(z.string()),
    scopes_supported: z.array(z.string()),
    service_documentation: z.url(),
    agent_registration_endpoint: z.url(),
  })
  .meta({ id: 'AuthorizationServerMetadata' });
const ProtectedResourceMetadata = z
  .object({
    resource: z.url(),
    resource_name: z.string(),
    authorization_servers: z.array(z.url()),
    scopes_supported: z.array(z.string()),
    bearer_methods_supported: z.array(z.literal('header')),
    resource_documentation: z.url(),
  })
  .meta({ id: 'ProtectedResourceMetadata' });

export const protectedResourceMetadataUrl = (baseUrl: string, resourcePath: 'api/agent' | 'mcp') =>
  `${baseUrl}/.well-known/oauth-protected-resource/${resourcePath}`;

const metadataRoutes: FastifyPluginAsyncZod = async (app) => {
  const { authUrl, baseUrl } = app.config;
  const cache = (reply: { header: (k: string, v: string) => unknown }) =>
    reply.header('cache-control', 'public, max-age=300');

  app.get(
    '/.well-known/jwks.json',
    {
      schema: {
        operationId: 'getJwks',
        security: [],
        tags: ['identity'],
        summary: 'Public keys that verify assertions and access tokens',
        response: { 200: Jwks },
      },
    },
    async (_request, reply) => {
      cache(reply);
      return app.idpKeys.jwks();
    },
  );

  app.get(
    '/.well-known/oauth-authorization-server',
    {
      schema: {
        operationId: 'getAuthorizationServerMetadata',
        security: [],
        tags: ['identity'],
        summary: 'RFC 8414 metadata',
        response: { 200: AuthorizationServerMetadata },
      },
    },
    async (_request, reply) => {
      cache(reply);
      return {
        issuer: authUrl,
        token_endpoint: tokenEndpoint(authUrl),
        jwks_uri: `${authUrl}/.well-known/jwks.json`,
        // The page where a person signs in to claim an agent.
        authorization_endpoint: `${authUrl}/agent/identity/claim/verify`,
        grant_types_supported: [JWT_BEARER],
        // No browser redirect flow is offered; agents use the JWT-bearer grant.
        response_types_supported: ['none'],
        token_endpoint_auth_methods_supported: ['none'],
        scopes_supported: [...AGENT_SCOPES],
        service_documentation: `${baseUrl}/auth.md`,
        agent_registration_endpoint: `${authUrl}/agent/identity`,
      };
    },
  );

  for (const [path, resource, name] of [
    ['api/agent', resources(baseUrl).agent, 'Agent API'],
    ['mcp', resources(baseUrl).mcp, 'Agent platform MCP endpoint'],
  ] as const) {
    app.get(
      `/.well-known/oauth-protected-resource/${path}`,
      {
        schema: {
          operationId: path === 'mcp' ? 'getMcpResourceMetadata' : 'getAgentApiResourceMetadata',
          security: [],
          tags: ['identity'],
          summary: `RFC 9728 metadata of ${resource}`,
          response: { 200: ProtectedResourceMetadata },
        },
      },
      async (_request, reply) => {
        cache(reply);
        return {
          resource,
          resource_name: name,
          authorization_servers: [authUrl],
          scopes_supported: [...AGENT_SCOPES],
          bearer_methods_supported: ['header' as const],
          resource_documentation: `${baseUrl}/auth.md`,
        };
      },
    );
  }
};

export default metadataRoutes;
