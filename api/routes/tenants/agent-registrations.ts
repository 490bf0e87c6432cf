// The agents of a tenant, for its Admins: list the agent registrations that
// act in the tenant (or were made with it as their own workspace), revoke
// one, or unlink its principal. The agent's next call answers 401
// registration_revoked or principal_not_linked, on every replica.
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import {
  listRegistrations,
  revokeRegistration,
  unlinkRegistration,
  type RegistrationListRow,
} from '../../../core/identity/registration-admin.ts';
import { pageOf, PageQuery } from '../../../core/paging.ts';
import { PlatformError, PlatformHttpError, platformCursor } from '../../errors.ts';
import { TenantHeaders } from '../../plugins/tenant.ts';

const AgentRegistration = z
  .object({
    id: z.uuid(),
    type: z.enum(['anonymous', 'service_auth']),
    status: z.enum(['active', 'revoked']).describe('revoked: its calls answer 401 registration_revoked'),
    claimState: z.enum(['unclaimed', 'pending', 'claimed']),
    linked: z
      .boolean()
      .describe(
        'false: its calls answer 401 principal_not_linked (unlinked, or the person who claimed it left the tenant it acts in)',
      ),
    principal: z.object({ id: z.uuid(), name: z.string(), status: z.enum(['active', 'unlinked']) }),
    ownWorkspaceId: z.uuid().describe('The workspace made at registration'),
    actsInTenantId: z.uuid().describe('Where it acts: the organization chosen at its claim, else its own workspace'),
    claimedBy: z
      .string()
      .nullable()
      .describe("E-mail of the person who claimed it (null: unclaimed, or the person's account was deleted)"),
    claimedAt: z.iso.datetime().nullable(),
    createdAt: z.iso.datetime(),
    revokedAt: z.iso.datetime().nullable(),
  })
  .meta({ id: 'AgentRegistration' });
const AgentRegistrationPage = z
  .object({ items: z.array(AgentRegistration), nextCursor: z.string().nullable() })
  .meta({ id: 'AgentRegistrationPage' });

const iso = (value: string | null) => (value === null ? null : new Date(value).toISOString());
const toItem = (r: RegistrationListRow) => ({
  id: r.id,
  type: r.type,
  status: r.status,
  claimState: r.claim_state,
  linked: r.linked,
  principal: { id: r.principal_id, name: r.principal_name, status: r.principal_status },
  ownWorkspaceId: r.own_tenant_id,
  actsInTenantId: r.acting_tenant_id,
  claimedBy: r.claimed_by_email,
  claimedAt: iso(r.claimed_at),
  createdAt: new Date(r.created_at).toISOString(),
  revokedAt: iso(r.revoked_at),
});

const agentRegistrationRoutes: FastifyPluginAsyncZod = async (app) => {
  const admin = { onRequest: app.requireUser, preValidation: app.requireTenant('admin') };
  const errors = { 400: PlatformError, 401: PlatformError, 403: PlatformError, 404: PlatformError };
  const security = [{ PlatformJWT: [] }];
  const notFound = () => new PlatformHttpError(404, 'not_found', 'No such agent registration in this tenant.');

  app.get(
    '/api/tenants/agent-registrations',
    {
      ...admin,
      schema: {
        operationId: 'listAgentRegistrations',
        tags: ['tenants'],
        summary:
          "The tenant's agents: registrations acting in it or made with it as their workspace (Admin), newest first",
        description: 'Keyset pages: pass nextCursor as cursor.',
        security,
        headers: TenantHeaders,
        querystring: PageQuery,
        response: { 200: AgentRegistrationPage, ...errors },
      },
    },
    async (request) => {
      const after = platformCursor(request.query.cursor);
      const rows = await listRegistrations(app.db, request.tenant!.id, { limit: request.query.limit, after });
      const { items, nextCursor } = pageOf(rows, request.query.limit);
      return { items: items.map(toItem), nextCursor };
    },
  );

  const Params = z.object({ registrationId: z.uuid() });
  for (const [action, run, summary] of [
    [
      'revoke',
      revokeRegistration,
      'Revoke an agent registration (Admin): its tokens and refresh token stop working; its next call answers 401 registration_revoked',
    ],
    [
      'unlink',
      unlinkRegistration,
      "Unlink an agent's principal (Admin): its next call answers 401 principal_not_linked; it must register again",
    ],
  ] as const) {
    app.post(
      `/api/tenants/agent-registrations/:registrationId/${action}`,
      {
        ...admin,
        schema: {
          operationId: action === 'revoke' ? 'revokeAgentRegistration' : 'unlinkAgentRegistration',
          tags: ['tenants'],
          summary,
          description:
            'Repeating it changes nothing and answers the same. Every api replica refuses the agent within a second.',
          security,
          headers: TenantHeaders,
          params: Params,
          response: { 200: AgentRegistration, ...errors },
        },
      },
      async (request) => {
        const row = await run(app.db, {
          tenantId: request.tenant!.id,
          registrationId: request.params.registrationId,
          userId: request.user!.userId,
        });
        if (!row) throw notFound();
        request.log.info(
          { registrationId: row.id, action },
          `agent registration ${action === 'revoke' ? 'revoked' : 'unlinked'} by a tenant Admin`,
        );
        return toItem(row);
      },
    );
  }
};

export default agentRegistrationRoutes;
