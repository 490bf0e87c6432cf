import { z } from 'zod';
import { TenantRoleSchema } from '../../../core/tenants/roles.ts';
import { AccountEmail } from '../../../core/accounts/email.ts';
import { PASSWORD_MAX_LENGTH } from '../../../core/crypto/passwords.ts';

export const Email = AccountEmail.describe('E-mail address');

export const LoginBody = z
  .object({ email: Email, password: z.string().min(1).max(PASSWORD_MAX_LENGTH) })
  .meta({ id: 'LoginRequest' });

export const RefreshBody = z
  .object({ refreshToken: z.string().min(10).max(200).describe('The refresh token from the last login or refresh') })
  .meta({ id: 'RefreshRequest' });

export const PublicUser = z
  .object({
    id: z.uuid(),
    email: z.string(),
    name: z.string().nullable(),
    avatarUrl: z.string().nullable(),
  })
  .meta({ id: 'User' });

export const Session = z
  .object({
    token: z.string().describe('Platform JWT; send as `Authorization: Bearer <token>`'),
    tokenType: z.literal('Bearer'),
    expiresIn: z.int().describe('Seconds until the token expires; renew with POST /api/auth/refresh'),
    refreshToken: z.string().describe('Single use; POST /api/auth/refresh returns a new one with the new token'),
    user: PublicUser,
  })
  .meta({ id: 'LoginResponse' });

export const Me = PublicUser.extend({
  roles: z.array(z.enum(['operator'])).describe('Platform-wide roles; `operator` is the global Admin'),
  memberships: z.array(z.object({ tenantId: z.uuid(), tenantName: z.string(), role: TenantRoleSchema })),
}).meta({ id: 'Me' });

export const AccountDeleted = z
  .object({
    deleted: z.literal(true),
    deletedTenants: z.int().describe('Tenants removed because the user was their only member'),
  })
  .meta({ id: 'AccountDeleted' });
