// A person's role in a workspace. Admin manages the workspace (its people,
// keys, billing, channels, integrations); Member does the work (chat,
// sessions, boards) and reads everything; Viewer reads. Each role may do
// everything the roles below it may.
import { z } from 'zod';

export const TENANT_ROLES = ['admin', 'member', 'viewer'] as const;
export type TenantRole = (typeof TENANT_ROLES)[number];
export const TenantRoleSchema = z.enum(TENANT_ROLES);

const RANK: Record<TenantRole, number> = { viewer: 0, member: 1, admin: 2 };

export const roleAtLeast = (role: TenantRole, minimum: TenantRole): boolean => RANK[role] >= RANK[minimum];

export const ROLE_TITLES: Record<TenantRole, string> = { admin: 'Admin', member: 'Member', viewer: 'Viewer' };

/** The words of a 403 for a role below the one a route needs. */
export const roleNeeded = (minimum: TenantRole): string =>
  minimum === 'admin'
    ? 'This needs the Admin role in the tenant.'
    : `This needs the ${ROLE_TITLES[minimum]} role (or Admin) in the tenant.`;
