// Agent authentication for the two protected resources of the agent surface:
// the Agent API ({base_url}/api/agent, `onRequest: app.requireAgent(scope)`)
// and the MCP endpoint ({base_url}/mcp, `app.mcpAuth`). A token is accepted
// only by the resource it names as audience, so a token for one is refused
// at the other. The bearer is verified locally (signature against the key
// store, issuer, audience, expiry); then one indexed read checks that the
// registration and principal are still live, and the memberships cache gives
// the claimer's current role (which the operations check). Refusals carry the resource's
// protected-resource metadata URL so a client can find the way to a token.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { bearerToken } from '../../core/auth/platform-token.ts';
import { agentContext, type AgentContextRow } from '../../core/agent/capabilities.ts';
import { AgentAuthCache } from '../../core/identity/auth-cache.ts';
import type { TenantRole } from '../../core/tenants/roles.ts';
import {
  RejectedTokenError,
  resources,
  verifyAccessToken,
  type AccessClaims,
  type AgentScope,
} from '../../core/identity/tokens.ts';
import { AgentHttpError } from '../errors.ts';
import { protectedResourceMetadataUrl } from '../routes/identity/metadata.ts';

export type AgentPrincipal = {
  principalId: string;
  registrationId: string;
  tenantId: string;
  scopes: AgentScope[];
  claimState: 'unclaimed' | 'pending' | 'claimed';
  expiresAt: number;
  /** Its claimer's current role in the workspace it acts in; null before a claim (no person: its scopes decide). */
  role: TenantRole | null;
};

export type AuthenticatedAgent = { agent: AgentPrincipal; context: AgentContextRow };

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
    /** Authentication for the MCP endpoint (audience {base_url}/mcp). */
    mcpAuth: AgentAuthenticator;
  }
}

type Resource = 'api/agent' | 'mcp';

/** Verifies bearer tokens for one protected resource. */
export class AgentAuthenticator {
  readonly audience: string;
  readonly metadataUrl: string;
  private cache: AgentAuthCache;

  constructor(
    private app: FastifyInstance,
    resource: Resource,
  ) {
    const { baseUrl } = app.config;
    this.audience = resource === 'mcp' ? resources(baseUrl).mcp : resources(baseUrl).agent;
    this.metadataUrl = protectedResourceMetadataUrl(baseUrl, resource);
    // One cache per resource: a token verified for one audience is never
    // found in the other's cache.
    this.cache = new AgentAuthCache(app.jobEvents);
  }

  /** The Bearer challenge for WWW-Authenticate (RFC 6750 with RFC 9728's resource_metadata). */
  challenge(error?: string, extra = ''): string {
    return `Bearer resource_metadata="${this.metadataUrl}"${error ? `, error="${error}"` : ''}${extra}`;
  }

  private unauthorized(code: string, message: string, error?: string) {
    return new AgentHttpError(401, code, message, 'reauthenticate', { 'www-authenticate': this.challenge(error) });
  }

  /** 403 scope_denied with the insufficient_scope challenge naming the scope. */
  scopeDenied(scope: AgentScope, claimState: AgentPrincipal['claimState']): AgentHttpError {
    return new AgentHttpError(
      403,
      'scope_denied',
      `This operation needs the scope ${scope}, which this token does not have.`,
      claimState === 'claimed' ? 'request_scope' : 'claim_account',
      {
        'www-authenticate': this.challenge('insufficient_scope', `, scope="${scope}"`),
      },
    );
  }

  private async verify(token: string): Promise<AccessClaims> {
    const cached = this.cache.token(token);
    if (cached) return cached;
    const claims = await verifyAccessToken(this.app.idpKeys, token, this.app.config.authUrl, this.audience);
    this.cache.rememberToken(token, claims);
    return claims;
  }

  /** Verified claims, or null: for admission limits keyed by principal. */
  claims(token: string): Promise<AccessClaims | null> {
    return this.verify(token).catch(() => null);
  }

  /** The live caller behind an Authorization header, or an AgentHttpError (401, 403). */
  async authenticate(authorization: string | undefined, scope?: AgentScope): Promise<AuthenticatedAgent> {
    const token = bearerToken(authorization);
    if (!token) {
      throw this.unauthorized(
        'invalid_credential',
        `Send an access token for ${this.audience} as \`Authorization: Bearer <token>\`; see the resource metadata for how to get one.`,
      );
    }
    let claims: AccessClaims;
    try {
      claims = await this.verify(token);
    } catch (error) {
      if (error instanceof RejectedTokenError)
        throw this.unauthorized(
          'invalid_credential',
          `${error.message}; exchange the assertion for a new token with resource ${this.audience}.`,
          'invalid_token',
        );
      throw error;
    }
    let live = this.cache.registration(claims.registrationId);
    if (!live) {
      const readStarted = this.cache.readStarted();
      live = (await agentContext(this.app.db, claims.registrationId)) ?? undefined;
      if (live) this.cache.rememberRegistration(claims.registrationId, live, readStarted);
    }
    if (!live || live.registration_status === 'revoked') {
      throw this.unauthorized(
        'registration_revoked',
        'The registration behind this token was revoked; register again.',
        'invalid_token',
      );
    }
    if (!live.linked || live.principal_id !== claims.principalId) throw this.notLinked();
    // The token names the workspace it was issued for; it acts elsewhere now
    // (the organization chosen at its claim was deleted, for example).
    if (live.tenant_id !== claims.tenantId) {
      throw this.unauthorized(
        'identity_conflict',
        'This token was issued for another workspace than the one its registration acts in now; get a new token from your assertion.',
        'invalid_token',
      );
    }
    const role = await this.claimerRole(live);
    if (live.tenant_suspended) {
      throw new AgentHttpError(
        403,
        'tenant_inactive',
        'The platform operator suspended this workspace; nothing works until a person of the workspace has its access restored (contact support). Do not register again to get around it.',
        'restore_account_access',
      );
    }
    if (scope && !claims.scopes.includes(scope)) throw this.scopeDenied(scope, live.claim_state);
    return { agent: { ...claims, claimState: live.claim_state, role }, context: live };
  }

  /**
   * The claimer's role now, from the memberships cache the platform's tenant
   * checks read (dropped by this process when it changes a membership, by
   * NOTIFY on the others): a role change or removal reaches the agent at its
   * next request. No longer a member: unlinked, as the snapshot would say.
   */
  private async claimerRole(live: AgentContextRow): Promise<TenantRole | null> {
    if (live.claim_state !== 'claimed' || !live.claimed_by) return null;
    const membership = await this.app.membershipOf(live.tenant_id, live.claimed_by);
    if (!membership) throw this.notLinked();
    return membership.role;
  }

  private notLinked() {
    return this.unauthorized(
      'principal_not_linked',
      'The agent is no longer linked: a workspace Admin unlinked it, or the person who claimed it left the workspace it acts in. Register again (and claim it again).',
      'invalid_token',
    );
  }
}

async function agentAuth(app: FastifyInstance) {
  const agentApi = new AgentAuthenticator(app, 'api/agent');
  app.decorate('mcpAuth', new AgentAuthenticator(app, 'mcp'));
  app.decorate('agentTokenClaims', (token: string) => agentApi.claims(token));
  app.decorateRequest('agent', null);
  app.decorateRequest('agentContext', null);
  app.decorate('requireAgent', (scope?: AgentScope) => async (request: FastifyRequest) => {
    const { agent, context } = await agentApi.authenticate(request.headers.authorization, scope);
    request.agent = agent;
    request.agentContext = context;
  });
}

export default fp(agentAuth, { name: 'agent-auth', dependencies: ['context', 'tenant'] });
