// What the identity provider signs. An assertion (long-lived, stored by the
// agent) is exchanged at the token endpoint for an access token (about five
// minutes, never stored) whose audience is one resource and whose scopes
// follow the claim state.
import { randomUUID } from 'node:crypto';
import { decodeJwt, decodeProtectedHeader, errors as joseErrors, jwtVerify, SignJWT } from 'jose';
import type { KeyStore } from './keys.ts';
import { SIGNING_ALG } from './keys.ts';
import { isDatabaseUnavailable } from '../db/unavailable.ts';

export const AGENT_SCOPES = [
  'svc:companies:read',
  'svc:boards:read',
  'svc:boards:publish',
  'svc:agents:write',
] as const;
export type AgentScope = (typeof AGENT_SCOPES)[number];

/** Before a claim: read-only views and restoring the trial's own agents. */
export const PRE_CLAIM_SCOPES: readonly AgentScope[] = ['svc:companies:read', 'svc:boards:read', 'svc:agents:write'];
/** After a claim, a person stands behind the agent: publishing too. */
export const POST_CLAIM_SCOPES: readonly AgentScope[] = AGENT_SCOPES;

export const scopesFor = (claimState: string): readonly AgentScope[] =>
  claimState === 'claimed' ? POST_CLAIM_SCOPES : PRE_CLAIM_SCOPES;

export const resources = (baseUrl: string) => ({ agent: `${baseUrl}/api/agent`, mcp: `${baseUrl}/mcp` });
export const tokenEndpoint = (authUrl: string) => `${authUrl}/oauth2/token`;

export type AssertionClaims = { registrationId: string; principalId: string };

export async function signAssertion(
  keys: KeyStore,
  authUrl: string,
  claims: AssertionClaims,
  ttlS: number,
): Promise<string> {
  const { kid, key } = await keys.signingKey();
  return new SignJWT({ reg: claims.registrationId, typ: 'agent_assertion' })
    .setProtectedHeader({ alg: SIGNING_ALG, kid, typ: 'JWT' })
    .setIssuer(authUrl)
    .setSubject(claims.principalId)
    .setAudience(tokenEndpoint(authUrl))
    .setJti(randomUUID())
    .setIssuedAt()
    .setExpirationTime(`${ttlS}s`)
    .sign(key);
}

export class UndecodableTokenError extends Error {
  override name = 'UndecodableTokenError';
}
export class RejectedTokenError extends Error {
  override name = 'RejectedTokenError';
}

/** Structural check first (cannot decode -> invalid_request), then signature and claims (-> invalid_grant). */
export async function verifyAssertion(keys: KeyStore, token: string, authUrl: string): Promise<AssertionClaims> {
  try {
    decodeProtectedHeader(token);
    decodeJwt(token);
  } catch {
    throw new UndecodableTokenError('the assertion is not a JWT');
  }
  try {
    const { payload } = await jwtVerify(token, (header) => keys.verificationKey(header.kid), {
      algorithms: [SIGNING_ALG],
      issuer: authUrl,
      audience: tokenEndpoint(authUrl),
      clockTolerance: 30,
      requiredClaims: ['exp', 'sub'],
    });
    if (payload.typ !== 'agent_assertion' || typeof payload.reg !== 'string' || !payload.sub) {
      throw new RejectedTokenError('not an agent assertion');
    }
    return { registrationId: payload.reg, principalId: payload.sub };
  } catch (error) {
    if (error instanceof RejectedTokenError) throw error;
    throw new RejectedTokenError(
      error instanceof joseErrors.JWTExpired ? 'the assertion has expired' : 'the assertion is not valid',
    );
  }
}

export type AccessClaims = {
  principalId: string;
  registrationId: string;
  tenantId: string;
  scopes: AgentScope[];
  expiresAt: number;
};

export async function signAccessToken(
  keys: KeyStore,
  authUrl: string,
  resource: string,
  claims: Omit<AccessClaims, 'expiresAt'>,
  ttlS: number,
): Promise<string> {
  const { kid, key } = await keys.signingKey();
  return new SignJWT({
    reg: claims.registrationId,
    tid: claims.tenantId,
    scope: claims.scopes.join(' '),
    client_id: claims.principalId,
  })
    .setProtectedHeader({ alg: SIGNING_ALG, kid, typ: 'at+jwt' })
    .setIssuer(authUrl)
    .setSubject(claims.principalId)
    .setAudience(resource)
    .setJti(randomUUID())
    .setIssuedAt()
    .setExpirationTime(`${ttlS}s`)
    .sign(key);
}

/** Local verification for resource servers: signature, issuer, audience, expiry. */
export async function verifyAccessToken(
  keys: KeyStore,
  token: string,
  authUrl: string,
  resource: string,
): Promise<AccessClaims> {
  try {
    const { payload } = await jwtVerify(token, (header) => keys.verificationKey(header.kid), {
      algorithms: [SIGNING_ALG],
      typ: 'at+jwt',
      issuer: authUrl,
      audience: resource,
      clockTolerance: 5,
      requiredClaims: ['exp', 'sub'],
    });
    if (typeof payload.reg !== 'string' || typeof payload.tid !== 'string' || typeof payload.scope !== 'string') {
      throw new RejectedTokenError('not an access token');
    }
    return {
      principalId: payload.sub!,
      registrationId: payload.reg,
      tenantId: payload.tid,
      scopes: payload.scope.split(' ').filter((s): s is AgentScope => (AGENT_SCOPES as readonly string[]).includes(s)),
      expiresAt: payload.exp!,
    };
  } catch (error) {
    if (error instanceof RejectedTokenError) throw error;
    // The keys could not be read (PostgreSQL away): an outage (503), not a bad token (401).
    if (isDatabaseUnavailable(error)) throw error;
    throw new RejectedTokenError(
      error instanceof joseErrors.JWTExpired
        ? 'the access token has expired'
        : 'the access token is not valid for this resource',
    );
  }
}
