// The caller's connected partner accounts (spec: Connected partner accounts,
// auth "Auth": a platform JWT; x-tenant-id when sent, else the default
// workspace). Listing needs Viewer; activating and removing need Admin (they
// change what the workspace's agents can do). Another person's or another
// workspace's account id is 404 not_found.
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import {
  activateAccount,
  listAccounts,
  removeAccount,
  statusOf,
  type AccountRow,
} from '../../../core/partner-accounts/accounts.ts';
import { serviceById, type Category } from '../../../core/partner-accounts/catalog.ts';
import { PartnerAccountError } from '../../../core/partner-accounts/client.ts';
import { PlatformError, PlatformHttpError } from '../../errors.ts';
import { OptionalTenantHeaders } from '../../plugins/tenant.ts';
import { AccountList, AccountParams, AccountRemoved, ActivateBody, PartnerAccount } from './schemas.ts';
import type { z } from 'zod';

type ServiceIdOut = z.infer<typeof PartnerAccount>['services'][number]['id'];

export function toAccount(a: AccountRow): z.infer<typeof PartnerAccount> {
  return {
    id: a.id,
    email: a.email,
    status: statusOf(a),
    services: a.services.map((s) => {
      const service = serviceById(s.serviceId);
      return {
        id: s.serviceId as ServiceIdOut,
        name: service?.name ?? s.serviceId,
        category: (service?.category ?? 'Specialized') as Category,
        scopes: s.scopes,
        active: s.active,
      };
    }),
    scopes: a.granted_scopes,
    connectedAt: a.connected_at,
    lastUsedAt: a.last_used_at,
  };
}

/** Runs a core step; its PartnerAccountError becomes the platform error. */
async function platformErrors<T>(step: () => Promise<T>): Promise<T> {
  try {
    return await step();
  } catch (error) {
    if (error instanceof PartnerAccountError) throw new PlatformHttpError(error.status, error.code, error.message);
    throw error;
  }
}

const accountRoutes: FastifyPluginAsyncZod = async (app) => {
  const security = [{ PlatformJWT: [] }];
  const viewer = { onRequest: app.requireUser, preValidation: app.requireWorkspace('viewer') };
  const admin = { onRequest: app.requireUser, preValidation: app.requireWorkspace('admin') };
  const errors = { 400: PlatformError, 401: PlatformError, 403: PlatformError, 404: PlatformError };

  app.get(
    '/api/partner-accounts/',
    {
      ...viewer,
      schema: {
        operationId: 'listPartnerAccounts',
        tags: ['partner-accounts'],
        summary:
          "The caller's connected partner accounts in the workspace: services, scopes, status, connected-at and last-used",
        security,
        headers: OptionalTenantHeaders,
        response: { 200: AccountList, ...errors },
      },
    },
    async (request) => ({
      items: (await listAccounts(app.db, request.tenant!.id, request.user!.userId)).map(toAccount),
    }),
  );

  app.post(
    '/api/partner-accounts/:accountId/activate',
    {
      ...admin,
      schema: {
        operationId: 'activatePartnerAccount',
        tags: ['partner-accounts'],
        summary: "Let the workspace's agents use this account for its services",
        description:
          'One active account per service per workspace: activating moves each service here from whichever account had it. ' +
          'Errors: 400 service_not_granted (the account has no grant for a named service); 404 not_found; 409 needs_reauth (connect it again first).',
        security,
        headers: OptionalTenantHeaders,
        params: AccountParams,
        body: ActivateBody.optional(),
        response: { 200: PartnerAccount, 409: PlatformError, ...errors },
      },
    },
    async (request) => {
      const { tenant, user } = request;
      const account = await platformErrors(() =>
        app.db.transaction((tx) =>
          activateAccount(tx, tenant!.id, user!.userId, request.params.accountId, request.body?.services),
        ),
      );
      request.log.info(
        { accountId: account.id, services: account.services.filter((s) => s.active).map((s) => s.serviceId) },
        'partner account activated',
      );
      return toAccount(account);
    },
  );

  app.delete(
    '/api/partner-accounts/:accountId',
    {
      ...admin,
      schema: {
        operationId: 'deletePartnerAccount',
        tags: ['partner-accounts'],
        summary: 'Remove the account: its tokens are deleted at once and revoked at the provider by a job with retries',
        description:
          'The account is gone from the list and unusable at once; the provider is asked to revoke the tokens (RFC 7009) in the background. Errors: 404 not_found.',
        security,
        headers: OptionalTenantHeaders,
        params: AccountParams,
        response: { 200: AccountRemoved, ...errors },
      },
    },
    async (request) => {
      const { tenant, user } = request;
      const queued = await platformErrors(() =>
        app.db.transaction((tx) => removeAccount(tx, tenant!.id, user!.userId, request.params.accountId)),
      );
      request.log.info(
        { accountId: request.params.accountId, revocation: queued ? 'queued' : 'none' },
        'partner account removed',
      );
      return { deleted: true as const, revocation: queued ? ('queued' as const) : ('none' as const) };
    },
  );
};

export default accountRoutes;
