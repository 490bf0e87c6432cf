// Memory routes are "Auth": a platform JWT alone works. With x-tenant-id the
// caller acts in that tenant (its role checked as everywhere); without it,
// in their own workspace: the first tenant where they are Admin, the one
// POST /api/chat/init provisions and returns.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { sql } from '../../../core/db/pool.ts';
import { PlatformHttpError } from '../../errors.ts';
import type { TenantRole } from '../../plugins/tenant.ts';

export const OptionalTenantHeaders = z.object({
  'x-tenant-id': z.uuid().optional().describe("The tenant (workspace); without it, the caller's own workspace (the one POST /api/chat/init returns)"),
});

export function requireWorkspace(app: FastifyInstance, minimum: TenantRole) {
  const inTenant = app.requireTenant(minimum);
  return async (request: FastifyRequest) => {
    if (request.headers['x-tenant-id'] !== undefined) return inTenant(request);
    if (!request.user) throw new PlatformHttpError(401, 'unauthorized', 'Authentication required.');
    const own = await app.db.maybeOneFirst(sql.type(z.object({ tenant_id: z.string() }))`
      select m.tenant_id from tenant_memberships m join tenants t on t.id = m.tenant_id
      where m.user_id = ${request.user.userId} and m.role = 'admin' order by t.created_at, t.id limit 1`);
    if (!own) {
      throw new PlatformHttpError(404, 'workspace_not_found', 'You have no workspace of your own yet: call POST /api/chat/init, or send x-tenant-id.');
    }
    request.tenant = { id: own, role: 'admin' };
  };
}
