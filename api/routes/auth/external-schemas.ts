// Request and response bodies of the external-login routes (partner, altidp).
import { z } from 'zod';
import { nameSchema } from '../../../core/names.ts';
import { Session } from './schemas.ts';

const token = (what: string) =>
  z
    .string()
    .min(1)
    .max(8192)
    .regex(/^[A-Za-z0-9._~+/=-]+$/, `${what}: base64url/JWT characters only`);
const nonce = z.string().min(1).max(512).describe('The nonce the app sent with the authorization request');

export const PartnerWebBody = z
  .object({
    code: z.string().min(1).max(2048).describe('The authorization code the provider returned to the web app'),
    codeVerifier: z
      .string()
      .regex(/^[A-Za-z0-9._~-]{43,128}$/, 'a PKCE code verifier (43-128 characters)')
      .describe('The PKCE code verifier of that authorization request'),
    redirectUri: z
      .url()
      .max(2048)
      .describe('The redirect URI of that authorization request; one of PARTNER_REDIRECT_URIS'),
    nonce: nonce.optional(),
  })
  .meta({ id: 'PartnerLoginRequest' });

export const PartnerIosBody = z
  .object({
    idToken: token('idToken').describe('The ID token the iOS sign-in returned, issued to PARTNER_IOS_CLIENT_ID'),
    nonce,
    serverAuthCode: z
      .string()
      .min(1)
      .max(2048)
      .optional()
      .describe('Optional: an authorization code for the web client; exchanged and checked to be the same person'),
    redirectUri: z
      .url()
      .max(2048)
      .optional()
      .describe('With serverAuthCode: the redirect URI it was issued for (one of PARTNER_REDIRECT_URIS)'),
    codeVerifier: z
      .string()
      .regex(/^[A-Za-z0-9._~-]{43,128}$/)
      .optional()
      .describe('With serverAuthCode: its PKCE verifier, when one was used'),
  })
  .meta({ id: 'PartnerIosLoginRequest' });

export const PartnerTokenBody = z
  .object({
    accessToken: token('accessToken').describe(
      "An access token the provider issued to one of this service's partner clients",
    ),
  })
  .meta({ id: 'PartnerTokenLoginRequest' });

export const AltidpStartQuery = z.object({
  mode: z
    .enum(['signin', 'onboarding'])
    .default('signin')
    .describe('Returned with the result, so the app knows which screen to show next'),
  next: z
    .string()
    .max(2048)
    .optional()
    .describe(
      'Where to send the browser afterwards: a path on this service (default /); the ticket arrives in the fragment',
    ),
});

export const AltidpCallbackBody = z
  .object({
    state: z.string().min(1).max(512),
    code: z.string().min(1).max(2048).optional(),
    iss: z.string().max(2048).optional(),
    user: z.string().max(4096).optional().describe("First sign-in only: JSON with the person's name"),
    error: z.string().max(200).optional(),
    error_description: z.string().max(2000).optional(),
  })
  .loose();

export const AltidpResultBody = z
  .object({
    ticket: z.string().min(1).max(200).describe('The ticket from the fragment of the `next` page (#altidp_ticket=...)'),
  })
  .meta({ id: 'AltidpResultRequest' });

export const AltidpDirectBody = z
  .object({
    identityToken: token('identityToken').describe("The identity token from the provider's native sign-in"),
    nonce: nonce.optional().describe('Required when the token carries a nonce'),
    name: nameSchema()
      .optional()
      .describe('Display name for a new account (the provider shares it only at the first sign-in); one line'),
  })
  .meta({ id: 'AltidpLoginRequest' });

export const AltidpNotificationBody = z
  .object({ payload: token('payload').describe('The signed notification (JWS) as the provider sends it') })
  .meta({ id: 'AltidpNotification' });

export const ExternalSession = Session.extend({
  newUser: z.boolean().describe('True when this login created the account'),
}).meta({ id: 'ExternalLoginResponse' });

export const AltidpResult = ExternalSession.extend({
  mode: z.enum(['signin', 'onboarding']).describe('The mode the flow was started with'),
}).meta({ id: 'AltidpLoginResult' });

export const NotificationReceived = z
  .object({
    received: z.literal(true),
    duplicate: z.boolean().describe('The same notification arrived before; it is applied once'),
    status: z.enum(['queued', 'applied', 'ignored', 'failed']),
  })
  .meta({ id: 'AltidpNotificationReceived' });
