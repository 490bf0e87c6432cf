// POST {auth_url}/agent/identity: register (anonymous, service_auth) or
// refresh. Each registration gets a new isolated free workspace.
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { AccountEmail } from '../../../core/accounts/email.ts';
import {
  createRegistration,
  rotateAgentRefreshToken,
  type RegistrationRow,
} from '../../../core/identity/registrations.ts';
import { signAssertion } from '../../../core/identity/tokens.ts';
import { LIMITS } from '../../../core/rate-limit.ts';
import { IdentityError, IdentityHttpError } from '../../errors.ts';

// Shapes are checked by hand after a loose parse, so a bad e-mail is
// invalid_login_hint and a bad token invalid_refresh_token, as the spec says.
const Body = z
  .object({
    type: z.enum(['anonymous', 'service_auth', 'refresh']),
    login_hint: z.string().max(320).optional(),
    refresh_token: z.string().max(200).optional(),
  })
  .meta({
    id: 'AgentIdentityRequest',
    description: '{type: anonymous} | {type: service_auth, login_hint} | {type: refresh, refresh_token}',
  });

export const Registration = z
  .object({
    registration: z.object({
      id: z.uuid(),
      type: z.enum(['anonymous', 'service_auth']),
      claim_state: z.enum(['unclaimed', 'pending', 'claimed']),
    }),
    identity: z
      .object({
        assertion: z.string().describe('Signed assertion; exchange it at the token endpoint'),
        assertion_expires_in: z.int(),
        refresh_token: z.object({ value: z.string().describe('Rotated on every refresh; store the newest') }),
        principal_id: z.uuid(),
        workspace_id: z.uuid(),
      })
      .nullable()
      .describe('Null for service_auth until the claim verifies'),
    claim: z
      .object({
        token: z.string().describe('Starts and completes a claim; store it with the registration'),
        expires_in: z.int(),
        claim_endpoint: z.url(),
      })
      .nullable()
      .describe('Present on registration; null on refresh'),
  })
  .meta({ id: 'AgentIdentityResponse' });

const registrationRoutes: FastifyPluginAsyncZod = async (app) => {
  const { config } = app;
  const identityOf = async (registration: RegistrationRow, refreshToken: string) => ({
    assertion: await signAssertion(
      app.idpKeys,
      config.authUrl,
      { registrationId: registration.id, principalId: registration.principal_id },
      config.identity.assertionTtlS,
    ),
    assertion_expires_in: config.identity.assertionTtlS,
    refresh_token: { value: refreshToken },
    principal_id: registration.principal_id,
    workspace_id: registration.tenant_id,
  });
  const summary = (r: RegistrationRow) => ({ id: r.id, type: r.type, claim_state: r.claim_state });
  const registrationLimit = app.rateLimit(LIMITS.agentRegistration);

  app.post(
    '/agent/identity',
    {
      schema: {
        operationId: 'registerAgentIdentity',
        security: [],
        tags: ['identity'],
        summary: 'Register an agent (anonymous or service_auth) or refresh a registration',
        body: Body,
        response: {
          200: Registration,
          201: Registration,
          400: IdentityError,
          401: IdentityError,
          403: IdentityError,
          429: IdentityError,
        },
      },
    },
    async (request, reply) => {
      const body = request.body;
      if (body.type === 'refresh') {
        if (!body.refresh_token) throw new IdentityHttpError(400, 'invalid_request', 'refresh needs refresh_token.');
        const outcome = await rotateAgentRefreshToken(app.db, body.refresh_token);
        if ('error' in outcome) {
          throw new IdentityHttpError(
            401,
            'invalid_refresh_token',
            'The refresh token is not valid (unknown, revoked or already used); register again.',
          );
        }
        return {
          registration: summary(outcome.registration),
          identity: await identityOf(outcome.registration, outcome.refreshToken),
          claim: null,
        };
      }

      if (body.type === 'anonymous' && config.identity.anonymousRegistrationDisabled) {
        throw new IdentityHttpError(
          403,
          'anonymous_registration_disabled',
          'Anonymous registration is turned off here; use service_auth.',
        );
      }
      if (body.type === 'service_auth' && config.identity.serviceAuthRegistrationDisabled) {
        throw new IdentityHttpError(
          403,
          'service_auth_registration_disabled',
          'service_auth registration is turned off here.',
        );
      }
      let loginHint: string | undefined;
      if (body.type === 'service_auth') {
        const hint = AccountEmail.safeParse(body.login_hint);
        if (!hint.success)
          throw new IdentityHttpError(
            400,
            'invalid_login_hint',
            'login_hint must be the e-mail address of the person who will claim the agent.',
          );
        loginHint = hint.data;
      }
      await registrationLimit(request, reply);
      const created = await createRegistration(app.db, {
        type: body.type,
        loginHint,
        ip: request.ip,
        claimTokenTtlS: config.identity.claimTokenTtlS,
      });
      request.log.info({ registrationId: created.registration.id, type: body.type }, 'agent registered');
      return reply.code(201).send({
        registration: summary(created.registration),
        identity: created.refreshToken ? await identityOf(created.registration, created.refreshToken) : null,
        claim: {
          token: created.claimToken,
          expires_in: config.identity.claimTokenTtlS,
          claim_endpoint: `${config.authUrl}/agent/identity/claim`,
        },
      });
    },
  );
};

export default registrationRoutes;
