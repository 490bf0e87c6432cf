// The claim ceremony's agent side: POST {auth_url}/agent/identity/claim opens
// an attempt and hands back a verification_uri for the person (an identifier,
// never a credential); POST .../claim/complete trades the user code the
// person read on that page for the verified identity, exactly once. The page
// itself lives in claim-page.ts and is registered from here.
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { completeClaim } from '../../../core/identity/claim-completion.ts';
import { ClaimError, startClaim, type ClaimErrorCode } from '../../../core/identity/claims.ts';
import { signAssertion } from '../../../core/identity/tokens.ts';
import { IdentityError, IdentityHttpError } from '../../errors.ts';
import claimPageRoutes, { CLAIM_PAGE_PREFIX } from './claim-page.ts';

/** Seconds an agent should wait between completion polls (RFC 8628 §3.2). */
export const POLL_INTERVAL_S = 5;

const STATUS: Partial<Record<ClaimErrorCode, number>> = {
  invalid_claim_token: 400,
  invalid_login_hint: 400,
  invalid_user_code: 400,
  claim_not_confirmed: 400, // like RFC 8628's authorization_pending
  claim_denied: 403,
  already_claimed: 409,
  organization_selection_required: 409,
  stale_organization_selection: 409,
  claim_expired: 410,
  claim_revoked: 410,
  user_code_expired: 410,
  too_many_attempts: 429,
  rate_limit_exceeded: 429,
};

const toHttp = (error: unknown) =>
  error instanceof ClaimError
    ? new IdentityHttpError(STATUS[error.code] ?? 400, error.code, error.message, error.retryAfter)
    : error;

const ClaimToken = z.string().min(1).max(200).describe('claim.token from the registration');

const ClaimBody = z
  .object({
    type: z.literal('service_auth').describe('The claim method: the person signs in with their account'),
    claim_token: ClaimToken,
    login_hint: z
      .string()
      .max(320)
      .describe('E-mail of the person who will claim; for a service_auth registration the one it was made for'),
  })
  .meta({ id: 'AgentClaimRequest' });

const ClaimAttempt = z
  .object({
    attempt: z.object({
      id: z.uuid(),
      verification_uri: z.url().describe('Give this link to the person; it carries no credential'),
      expires_in: z.int().describe('Seconds until the attempt expires'),
      interval: z.int().describe('Seconds to wait between calls to claim/complete'),
    }),
  })
  .meta({ id: 'AgentClaimAttempt' });

const CompleteBody = z
  .object({
    claim_token: ClaimToken,
    user_code: z
      .string()
      .min(1)
      .max(64)
      .describe('The code the person read on the claim page; case, dashes and spaces are ignored'),
  })
  .meta({ id: 'AgentClaimCompleteRequest' });

const ClaimCompleted = z
  .object({
    registration: z.object({
      id: z.uuid(),
      type: z.enum(['anonymous', 'service_auth']),
      claim_state: z.literal('claimed'),
    }),
    identity: z.object({
      assertion: z.string().describe('Signed assertion; exchange it at the token endpoint'),
      assertion_expires_in: z.int(),
      refresh_token: z.object({ value: z.string().describe('Store it; rotated on every refresh') }),
    }),
  })
  .meta({ id: 'AgentClaimCompleted', description: 'The verified identity, returned once' });

const errors = { 400: IdentityError, 403: IdentityError, 409: IdentityError, 410: IdentityError, 429: IdentityError };

const claimRoutes: FastifyPluginAsyncZod = async (app) => {
  const { config } = app;
  const disabled = () =>
    new IdentityHttpError(403, 'auth_method_disabled', 'Claiming with service_auth is turned off here.');

  app.post(
    '/agent/identity/claim',
    {
      schema: {
        operationId: 'startAgentClaim',
        security: [],
        tags: ['identity'],
        summary: 'Start a claim: returns a verification_uri for the person to sign in and confirm',
        description:
          'Errors: 400 invalid_request, invalid_claim_token, invalid_login_hint; 403 auth_method_disabled; 409 already_claimed; ' +
          '410 claim_expired, claim_revoked; 429 too_many_attempts (retry_after: until a pending attempt expires).',
        body: ClaimBody,
        response: { 200: ClaimAttempt, ...errors },
      },
    },
    async (request, reply) => {
      if (config.identity.serviceAuthRegistrationDisabled) throw disabled();
      const started = await startClaim(app.db, {
        claimToken: request.body.claim_token,
        loginHint: request.body.login_hint,
      }).catch((e) => {
        throw toHttp(e);
      });
      request.log.info({ attemptId: started.attemptId }, 'claim attempt opened');
      reply.header('cache-control', 'no-store');
      return {
        attempt: {
          id: started.attemptId,
          verification_uri: `${config.authUrl}${CLAIM_PAGE_PREFIX}/${started.attemptId}`,
          expires_in: started.expiresIn,
          interval: POLL_INTERVAL_S,
        },
      };
    },
  );

  app.post(
    '/agent/identity/claim/complete',
    {
      schema: {
        operationId: 'completeAgentClaim',
        security: [],
        tags: ['identity'],
        summary: 'Complete a claim with the user code; returns the verified identity once',
        description:
          'Errors: 400 invalid_request, invalid_claim_token, invalid_user_code, claim_not_confirmed (wait interval seconds, retry); ' +
          '403 auth_method_disabled, claim_denied; 409 already_claimed, organization_selection_required, stale_organization_selection ' +
          '(the person chooses on the claim page, then retry); 410 claim_expired, claim_revoked, user_code_expired (start a new claim); ' +
          '429 rate_limit_exceeded (retry_after).',
        body: CompleteBody,
        response: { 200: ClaimCompleted, ...errors },
      },
    },
    async (request, reply) => {
      if (config.identity.serviceAuthRegistrationDisabled) throw disabled();
      const done = await completeClaim(app.db, {
        claimToken: request.body.claim_token,
        userCode: request.body.user_code,
        clientIp: request.ip,
        sign: (claims) => signAssertion(app.idpKeys, config.authUrl, claims, config.identity.assertionTtlS),
      }).catch((e) => {
        throw toHttp(e);
      });
      request.log.info({ registrationId: done.registration.id, userId: done.registration.claimed_by }, 'agent claimed');
      reply.header('cache-control', 'no-store');
      return {
        registration: { id: done.registration.id, type: done.registration.type, claim_state: 'claimed' as const },
        identity: {
          assertion: done.assertion,
          assertion_expires_in: config.identity.assertionTtlS,
          refresh_token: { value: done.refreshToken },
        },
      };
    },
  );

  await app.register(claimPageRoutes);
};

export default claimRoutes;
