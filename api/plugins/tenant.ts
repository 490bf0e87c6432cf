// Tenant context: `preHandler: app.requireTenant('admin' | 'viewer')` after
// `onRequest: app.requireUser`. Reads x-tenant-id, checks the caller's
// membership and role, and exposes request.tenant. Routes filter every
// tenant-scoped query by request.tenant.id, never by anything in the body.
// Not a member reads exactly like a tenant that does not exist.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { z } from 'zod';
import { InvalidatedCache } from '../../core/cache/invalidated-cache.ts';
import { sql } from '../../core/db/pool.ts';
import { PlatformHttpError } from '../errors.ts';

export type TenantRole = 'admin' | 'viewer';
export type TenantContext = { id: string; role: TenantRole };

declare module 'fastify' {
  interface FastifyRequest {
    tenant: TenantContext | null;
  }
  interface FastifyInstance {
    requireTenant: (minimum: TenantRole) => (request: FastifyRequest) => Promise<void>;
    /**
     * The spec's "Auth" routes: a platform JWT alone works. x-tenant-id when
     * sent (checked like requireTenant), else the caller's workspace (see
     * defaultWorkspace).
     */
    requireWorkspace: (minimum: TenantRole) => (request: FastifyRequest) => Promise<void>;
  }
}

/** The header schema routes declare, so it is validated and documented. */
export const TenantHeaders = z.object({
  'x-tenant-id': z.uuid().describe('The tenant (workspace) the request acts in'),
});

/** For "Auth" routes, where the header may be left out. */
export const OptionalTenantHeaders = z.object({
  'x-tenant-id': z
    .uuid()
    .optional()
    .describe("The tenant (workspace); without it, the caller's only tenant, else their own workspace (the one POST /api/chat/init returns)"),
});

const Membership = z.object({ role: z.enum(['admin', 'viewer']), suspended: z.boolean() });
const Memberships = z.object({ tenant_id: z.string(), role: z.enum(['admin', 'viewer']), suspended: z.boolean() });

/** An operator suspended the tenant (core/tenants/suspension.ts): its people are refused, members or not of other tenants. */
const suspended = () =>
  new PlatformHttpError(403, 'tenant_inactive', 'The platform operator suspended this workspace; contact support to restore access.');

async function tenantPlugin(app: FastifyInstance) {
  // Roles are cached per replica and dropped by NOTIFY when a membership changes.
  // A suspension drops the entries of every member too (0023).
  const memberships = new InvalidatedCache<{ role: TenantRole; suspended: boolean } | null>(app.jobEvents, 'user_cache_events');
  app.decorateRequest('tenant', null);
  app.decorate('requireTenant', (minimum: TenantRole) => async (request: FastifyRequest) => {
    if (!request.user) throw new PlatformHttpError(401, 'unauthorized', 'Authentication required.');
    const header = TenantHeaders.safeParse(request.headers);
    if (!header.success) {
      throw new PlatformHttpError(400, 'invalid_request', 'Send the tenant id as the `x-tenant-id` header (a UUID).');
    }
    const tenantId = header.data['x-tenant-id'];
    const userId = request.user.userId;
    const membership = await memberships.get(`member:${tenantId}:${userId}`, () =>
      app.db.maybeOne(sql.type(Membership)`
        select m.role, t.suspended_at is not null as suspended from tenant_memberships m join tenants t on t.id = m.tenant_id
        where m.tenant_id = ${tenantId} and m.user_id = ${userId}`),
    );
    if (!membership) throw new PlatformHttpError(404, 'not_found', 'No such tenant.');
    if (membership.suspended) throw suspended();
    if (minimum === 'admin' && membership.role !== 'admin') {
      throw new PlatformHttpError(403, 'forbidden', 'This needs the Admin role in the tenant.');
    }
    request.tenant = { id: tenantId, role: membership.role };
  });

  /**
   * Without x-tenant-id: the only tenant the caller belongs to; else their own
   * workspace, the oldest tenant they administer (what POST /api/chat/init
   * provisions and returns); a caller who only has Viewer roles in several
   * tenants must say which (400 naming the header).
   */
  async function defaultWorkspace(userId: string): Promise<TenantContext & { suspended: boolean }> {
    const rows = await app.db.any(sql.type(Memberships)`
      select m.tenant_id, m.role, t.suspended_at is not null as suspended from tenant_memberships m join tenants t on t.id = m.tenant_id
      where m.user_id = ${userId} order by (m.role = 'admin') desc, t.created_at, t.id limit 2`);
    const [first, second] = rows;
    if (!first) throw new PlatformHttpError(404, 'workspace_not_found', 'You belong to no workspace yet: call POST /api/chat/init, or send x-tenant-id.');
    if (first.role !== 'admin' && second) {
      throw new PlatformHttpError(400, 'invalid_request', 'You belong to several tenants and administer none: send the `x-tenant-id` header to say which.');
    }
    return { id: first.tenant_id, role: first.role, suspended: first.suspended };
  }

  app.decorate('requireWorkspace', (minimum: TenantRole) => {
    const inTenant = app.requireTenant(minimum);
    return async (request: FastifyRequest) => {
      if (request.headers['x-tenant-id'] !== undefined) return inTenant(request);
      if (!request.user) throw new PlatformHttpError(401, 'unauthorized', 'Authentication required.');
      const workspace = await defaultWorkspace(request.user.userId);
      if (workspace.suspended) throw suspended();
      if (minimum === 'admin' && workspace.role !== 'admin') {
        throw new PlatformHttpError(403, 'forbidden', 'This needs the Admin role in the tenant.');
      }
      request.tenant = { id: workspace.id, role: workspace.role };
    };
  });
}

export default fp(tenantPlugin, { name: 'tenant', dependencies: ['platform-auth'] });
