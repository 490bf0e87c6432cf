// Tenant context: `preValidation: app.requireTenant('admin' | 'member' |
// 'viewer')` after `onRequest: app.requireUser`. Reads x-tenant-id, checks
// the caller's membership and role (before the body is validated: a role
// too low is 403 whatever the body), and exposes request.tenant. Routes
// filter every tenant-scoped query by request.tenant.id, never by anything
// in the body. Not a member reads exactly like a tenant that does not exist.
// Each route's role is declared once, there: the OpenAPI operation carries it
// as `x-tenant-role`, and the roles matrix in the docs is made from that.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { z } from 'zod';
import { InvalidatedCache } from '../../core/cache/invalidated-cache.ts';
import { sql } from '../../core/db/pool.ts';
import { roleAtLeast, roleNeeded, TenantRoleSchema, type TenantRole } from '../../core/tenants/roles.ts';
import { PlatformHttpError } from '../errors.ts';
import { validationMessage } from '../validation-words.ts';

export type { TenantRole } from '../../core/tenants/roles.ts';
export type TenantContext = { id: string; role: TenantRole };

declare module 'fastify' {
  interface FastifyRequest {
    tenant: TenantContext | null;
  }
  interface FastifyInstance {
    requireTenant: (minimum: TenantRole) => TenantCheck;
    /**
     * The spec's "Auth" routes: a platform JWT alone works. x-tenant-id when
     * sent (checked like requireTenant), else the caller's workspace (see
     * defaultWorkspace).
     */
    requireWorkspace: (minimum: TenantRole) => TenantCheck;
    /** After this process changed a membership: its next check reads it again (other replicas hear the NOTIFY). */
    forgetMembership: (tenantId: string, userId: string) => void;
    /**
     * A person's current role in a tenant (null: not a member), from the same
     * cache the tenant checks read: the Agent API reads its claimer's role here.
     */
    membershipOf: (tenantId: string, userId: string) => Promise<MembershipState | null>;
  }
}

/** A route's tenant check; `tenantRole` is the role it declares (read into OpenAPI). */
export type TenantCheck = ((request: FastifyRequest) => Promise<void>) & { tenantRole: TenantRole };

/** The role a route's hooks declare, if one of them is a tenant check. */
export function declaredRole(hooks: unknown): TenantRole | null {
  for (const hook of [hooks].flat()) {
    const role = (hook as Partial<TenantCheck> | undefined)?.tenantRole;
    if (role) return role;
  }
  return null;
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
    .describe(
      "The tenant (workspace); without it, the caller's only tenant, else their own workspace (the one POST /api/chat/init returns)",
    ),
});

const Membership = z.object({ role: TenantRoleSchema, suspended: z.boolean() });
export type MembershipState = z.infer<typeof Membership>;
const Memberships = z.object({ tenant_id: z.string(), role: TenantRoleSchema, suspended: z.boolean() });

/** An operator suspended the tenant (core/tenants/suspension.ts): its people are refused, members or not of other tenants. */
const suspended = () =>
  new PlatformHttpError(
    403,
    'tenant_inactive',
    'The platform operator suspended this workspace; contact support to restore access.',
  );

async function tenantPlugin(app: FastifyInstance) {
  // Roles are cached per replica and dropped by NOTIFY when a membership changes.
  // A suspension drops the entries of every member too (0023).
  const memberships = new InvalidatedCache<MembershipState | null>(app.jobEvents, 'user_cache_events');
  app.decorateRequest('tenant', null);
  app.decorate('forgetMembership', (tenantId: string, userId: string) =>
    memberships.forget(`member:${tenantId}:${userId}`),
  );
  const membershipOf = (tenantId: string, userId: string) =>
    memberships.get(`member:${tenantId}:${userId}`, () =>
      app.db.maybeOne(sql.type(Membership)`
        select m.role, t.suspended_at is not null as suspended from tenant_memberships m join tenants t on t.id = m.tenant_id
        where m.tenant_id = ${tenantId} and m.user_id = ${userId}`),
    );
  app.decorate('membershipOf', membershipOf);
  const tagged = (check: (request: FastifyRequest) => Promise<void>, minimum: TenantRole): TenantCheck =>
    Object.assign(check, { tenantRole: minimum });

  // The declared role goes into the route's schema, so OpenAPI and the roles matrix show it.
  app.addHook('onRoute', (route) => {
    const role = declaredRole(route.preValidation) ?? declaredRole(route.preHandler);
    if (role && route.schema) (route.schema as Record<string, unknown>)['x-tenant-role'] = role;
  });

  app.decorate('requireTenant', (minimum: TenantRole) =>
    tagged(async (request: FastifyRequest) => {
      if (!request.user) throw new PlatformHttpError(401, 'unauthorized', 'Authentication required.');
      const header = TenantHeaders.safeParse(request.headers);
      if (!header.success) {
        // Checked before the validator runs (a role too low is 403 whatever the body), in its words.
        const details = [{ path: 'header.x-tenant-id', message: header.error.issues[0]?.message ?? 'Invalid input' }];
        throw new PlatformHttpError(400, 'invalid_request', validationMessage(details), {}, details);
      }
      const tenantId = header.data['x-tenant-id'];
      const userId = request.user.userId;
      const membership = await membershipOf(tenantId, userId);
      if (!membership) throw new PlatformHttpError(404, 'not_found', 'No such tenant.');
      if (membership.suspended) throw suspended();
      if (!roleAtLeast(membership.role, minimum)) throw new PlatformHttpError(403, 'forbidden', roleNeeded(minimum));
      request.tenant = { id: tenantId, role: membership.role };
    }, minimum),
  );

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
    if (!first)
      throw new PlatformHttpError(
        404,
        'workspace_not_found',
        'You belong to no workspace yet: call POST /api/chat/init, or send x-tenant-id.',
      );
    if (first.role !== 'admin' && second) {
      throw new PlatformHttpError(
        400,
        'invalid_request',
        'You belong to several tenants and administer none: send the `x-tenant-id` header to say which.',
      );
    }
    return { id: first.tenant_id, role: first.role, suspended: first.suspended };
  }

  app.decorate('requireWorkspace', (minimum: TenantRole) => {
    const inTenant = app.requireTenant(minimum);
    return tagged(async (request: FastifyRequest) => {
      if (request.headers['x-tenant-id'] !== undefined) return inTenant(request);
      if (!request.user) throw new PlatformHttpError(401, 'unauthorized', 'Authentication required.');
      const workspace = await defaultWorkspace(request.user.userId);
      if (workspace.suspended) throw suspended();
      if (!roleAtLeast(workspace.role, minimum)) throw new PlatformHttpError(403, 'forbidden', roleNeeded(minimum));
      request.tenant = { id: workspace.id, role: workspace.role };
    }, minimum);
  });
}

export default fp(tenantPlugin, { name: 'tenant', dependencies: ['platform-auth'] });
