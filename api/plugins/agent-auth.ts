// Agent API authentication: `onRequest: app.requireAgent('svc:companies:read')`.
// The bearer is verified locally (signature against the key store, issuer,
// audience {base_url}/api/agent, expiry); then one indexed read checks that
// the registration and principal are still live. Refusals carry the
// protected-resource metadata URL so a client can find the way to a token.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { bearerToken } from '../../core/auth/platform-token.ts';
import { agentContext, type AgentContextRow } from '../../core/agent/capabilities.ts';
import { AgentAuthCache } from '../../core/identity/auth-cache.ts';
import { RejectedTokenError, resources, verifyAccessToken, type AccessClaims, type AgentScope } from '../../core/identity/tokens.ts';
import { AgentHttpError } from '../errors.ts';
import { protectedResourceMetadataUrl } from '../routes/identity/metadata.ts';

export type AgentPrincipal = {
  principalId: string;
  registrationId: string;
  tenantId: string;
  scopes: AgentScope[];
  claimState: 'unclaimed' | 'pending' | 'claimed';
  expiresAt: number;
};

declare module 'fastify' {
  interface FastifyRequest {
    agent: AgentPrincipal | null;
    /** Registration, principal and workspace of the caller, read (or cached) by the auth check. */
    agentContext: AgentContextRow | null;
  }
  interface FastifyInstance {
    requireAgent: (scope?: AgentScope) => (request: FastifyRequest) => Promise<void>;
    /** The verified claims of an Agent API token (cached), or null when it does not verify. */
    agentTokenClaims: (token: string) => Promise<AccessClaims | null>;
  }
}

async function agentAuth(app: FastifyInstance) {
  const { authUrl, baseUrl } = app.config;
  const audience = resources(baseUrl).agent;
  const metadata = protectedResourceMetadataUrl(baseUrl, 'api/agent');
  const challenge = (error?: string, extra = '') =>
    `Bearer resource_metadata="${metadata}"${error ? `, error="${error}"` : ''}${extra}`;
  const unauthorized = (code: string, message: string, error?: string) =>
    new AgentHttpError(401, code, message, 'reauthenticate', { 'www-authenticate': challenge(error) });

  const cache = new AgentAuthCache(app.jobEvents);
  const claimsOf = async (token: string): Promise<AccessClaims> => {
    const cached = cache.token(token);
    if (cached) return cached;
    const claims = await verifyAccessToken(app.idpKeys, token, authUrl, audience);
    cache.rememberToken(token, claims);
    return claims;
  };
  app.decorate('agentTokenClaims', (token: string) => claimsOf(token).catch(() => null));
  app.decorateRequest('agent', null);
  app.decorateRequest('agentContext', null);
  app.decorate('requireAgent', (scope?: AgentScope) => async (request: FastifyRequest) => {
    const token = bearerToken(request.headers.authorization);
    if (!token) throw unauthorized('invalid_credential', 'Send an access token for the Agent API as `Authorization: Bearer <token>`; see the resource metadata for how to get one.');
    let claims: AccessClaims;
    try {
      claims = await claimsOf(token);
    } catch (error) {
      if (error instanceof RejectedTokenError) throw unauthorized('invalid_credential', `${error.message}; exchange the assertion for a new token.`, 'invalid_token');
      throw error;
    }
    let live = cache.registration(claims.registrationId);
    if (!live) {
      live = (await agentContext(app.db, claims.registrationId)) ?? undefined;
      if (live) cache.rememberRegistration(claims.registrationId, live);
    }
    if (!live || live.registration_status === 'revoked') {
      throw unauthorized('registration_revoked', 'The registration behind this token was revoked; register again.', 'invalid_token');
    }
    if (live.principal_status !== 'active' || live.principal_id !== claims.principalId) {
      throw unauthorized('principal_not_linked', 'The agent principal is no longer linked to this registration; register or claim again.', 'invalid_token');
    }
    if (scope && !claims.scopes.includes(scope)) {
      throw new AgentHttpError(403, 'scope_denied', `This operation needs the scope ${scope}, which this token does not have.`, live.claim_state === 'claimed' ? 'request_scope' : 'claim_account', {
        'www-authenticate': challenge('insufficient_scope', `, scope="${scope}"`),
      });
    }
    request.agent = { ...claims, claimState: live.claim_state };
    request.agentContext = live;
  });
}

export default fp(agentAuth, { name: 'agent-auth', dependencies: ['context'] });
