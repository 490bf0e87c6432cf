// Request and response bodies of the connected partner account routes; the
// service ids come from the catalog (core/partner-accounts/catalog.ts).
import { z } from 'zod';
import { CATEGORIES, SERVICE_IDS } from '../../../core/partner-accounts/catalog.ts';

export const ServiceIdSchema = z.enum(SERVICE_IDS).describe('A service of GET /oauth/partner/services');
const Scope = z.string().describe('An OAuth scope (svc.<service>.<read|write>)');

export const ServiceCatalog = z
  .object({
    count: z.int().describe('Number of services (25)'),
    categories: z.array(
      z.object({
        category: z.enum(CATEGORIES),
        services: z.array(
          z.object({ id: ServiceIdSchema, name: z.string(), description: z.string(), scopes: z.array(Scope) }),
        ),
      }),
    ),
  })
  .meta({ id: 'PartnerServiceCatalog' });

const servicesList = z.array(ServiceIdSchema).min(1).max(SERVICE_IDS.length);

export const StartQuery = z.object({
  services: z
    .string()
    .max(1000)
    .regex(/^[a-z]+(,[a-z]+)*$/, 'comma-separated service ids')
    .optional()
    .describe('Comma-separated service ids (default: the Core services)'),
});

export const StartBody = z
  .object({ services: servicesList.optional().describe('The services to grant (default: the Core services)') })
  .strict()
  .meta({ id: 'PartnerConnectStartRequest' });

export const StartedFlow = z
  .object({
    flowId: z.uuid().describe('Poll GET /oauth/partner/status?flow=<flowId>'),
    authorizationUrl: z
      .url()
      .describe(
        "Open it in the person's browser (the one that made this request: the flow is bound to it by a cookie)",
      ),
    services: z.array(ServiceIdSchema),
    scope: z
      .string()
      .describe("The scopes asked for: openid offline_access, the chosen services', and those already granted"),
    expiresAt: z.iso.datetime(),
  })
  .meta({ id: 'PartnerConnectStarted' });

export const CallbackQuery = z
  .object({
    state: z.string().max(512).optional(),
    code: z.string().max(2048).optional(),
    iss: z.string().max(2048).optional(),
    error: z.string().max(200).optional(),
    error_description: z.string().max(2000).optional(),
  })
  .loose();

export const StatusQuery = z.object({ flow: z.uuid().describe('The flowId from POST /oauth/partner/start') });

export const FlowStatus = z
  .object({
    flowId: z.uuid(),
    status: z.enum(['pending', 'completed', 'failed']),
    reason: z
      .string()
      .nullable()
      .describe(
        'Why it failed: access_denied (or another error the provider sent), invalid_code, provider_unavailable, other_browser, expired',
      ),
    services: z.array(z.string()),
    accountId: z.uuid().nullable().describe('The connected account, once completed'),
    createdAt: z.iso.datetime(),
    finishedAt: z.iso.datetime().nullable(),
  })
  .meta({ id: 'PartnerConnectStatus' });

export const AccountParams = z.object({ accountId: z.uuid() });

export const ActivateBody = z
  .object({ services: servicesList.optional().describe("Only these of the account's services (default: all of them)") })
  .strict()
  .meta({ id: 'PartnerAccountActivateRequest' });

export const PartnerAccount = z
  .object({
    id: z.uuid(),
    email: z.string().nullable().describe('The e-mail the provider gave for the account, if any'),
    status: z
      .enum(['active', 'inactive', 'needs_reauth', 'revoked'])
      .describe(
        "active: the workspace's agents use it for at least one service; inactive: connected, used for none; needs_reauth: the provider refused the refresh token, connect it again; revoked: removed (such accounts are no longer listed)",
      ),
    services: z.array(
      z.object({
        id: ServiceIdSchema,
        name: z.string(),
        category: z.enum(CATEGORIES),
        scopes: z.array(Scope).describe('The scopes of this service that were granted'),
        active: z.boolean().describe("The workspace's agents use this account for this service"),
      }),
    ),
    scopes: z.array(Scope).describe('Every scope granted to the account'),
    connectedAt: z.iso.datetime(),
    lastUsedAt: z.iso.datetime().nullable(),
  })
  .meta({ id: 'PartnerAccount' });

export const AccountList = z.object({ items: z.array(PartnerAccount) }).meta({ id: 'PartnerAccountList' });

export const AccountRemoved = z
  .object({
    deleted: z.literal(true),
    revocation: z
      .enum(['queued', 'none'])
      .describe('queued: the provider is asked to revoke the tokens by a job with retries'),
  })
  .meta({ id: 'PartnerAccountRemoved' });
