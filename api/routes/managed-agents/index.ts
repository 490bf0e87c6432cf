// Managed agents for tenant Admins (platform API): create, and soft delete
// (the row stays as a tombstone; deleted authority agents are never restored).
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import {
  createManagedAgent,
  deleteManagedAgent,
  MANAGED_AGENT_KINDS,
  type ManagedAgentRow,
} from '../../../core/managed-agents/managed-agents.ts';
import { nameSchema } from '../../../core/names.ts';
import { PlatformError, PlatformHttpError } from '../../errors.ts';
import { TenantHeaders } from '../../plugins/tenant.ts';

const ManagedAgent = z
  .object({
    id: z.uuid(),
    name: z.string(),
    kind: z.enum(MANAGED_AGENT_KINDS),
    status: z.enum(['active', 'deleted']),
    deletedAt: z.iso.datetime().nullable(),
    createdAt: z.iso.datetime(),
    restoredAt: z.iso.datetime().nullable(),
  })
  .meta({ id: 'PlatformManagedAgent' });

const toAgent = (a: ManagedAgentRow) => ({
  id: a.id,
  name: a.name,
  kind: a.kind,
  status: a.status,
  deletedAt: a.deleted_at,
  createdAt: a.created_at,
  restoredAt: a.restored_at,
});

const managedAgentPlatformRoutes: FastifyPluginAsyncZod = async (app) => {
  const security = [{ PlatformJWT: [] }];
  const admin = { onRequest: app.requireUser, preValidation: app.requireTenant('admin') };
  const errors = { 400: PlatformError, 401: PlatformError, 403: PlatformError, 404: PlatformError };

  app.post(
    '/api/managed-agents',
    {
      ...admin,
      schema: {
        operationId: 'createManagedAgent',
        tags: ['managed-agents'],
        summary: 'Create a managed agent',
        security,
        headers: TenantHeaders,
        body: z.object({
          name: nameSchema(),
          kind: z.enum(MANAGED_AGENT_KINDS).default('standalone'),
        }),
        description:
          'Takes an agent slot: 402 agent_addon_required when all are in use (buy one with POST /api/billing/agent-addon).',
        response: { 201: ManagedAgent, 402: PlatformError, ...errors },
      },
    },
    async (request, reply) => {
      const agent = await createManagedAgent(app.db, {
        tenantId: request.tenant!.id,
        name: request.body.name,
        kind: request.body.kind,
      });
      return reply.code(201).send(toAgent(agent));
    },
  );

  app.delete(
    '/api/managed-agents/:id',
    {
      ...admin,
      schema: {
        operationId: 'deleteManagedAgent',
        tags: ['managed-agents'],
        summary: 'Soft-delete a managed agent (repeatable)',
        security,
        headers: TenantHeaders,
        params: z.object({ id: z.uuid() }),
        response: { 200: ManagedAgent, ...errors },
      },
    },
    async (request) => {
      const agent = await deleteManagedAgent(app.db, request.tenant!.id, request.params.id);
      if (!agent) throw new PlatformHttpError(404, 'not_found', 'No such managed agent.');
      return toAgent(agent);
    },
  );
};

export default managedAgentPlatformRoutes;
