// The login payload every way in answers with (password, partner, altidp):
// a platform JWT and a refresh token.
import type { FastifyInstance } from 'fastify';
import { DEFAULT_PLATFORM_TOKEN_TTL_S, signPlatformToken } from '../../../core/auth/platform-token.ts';
import type { UserRow } from '../../../core/accounts/users.ts';

export const publicUser = (u: UserRow) => ({ id: u.id, email: u.email, name: u.display_name, avatarUrl: u.avatar_url });

export async function sessionPayload(app: FastifyInstance, user: UserRow, refreshToken: string) {
  return {
    token: await signPlatformToken({ userId: user.id }, app.config.secrets.PLATFORM_JWT_SECRET, app.config.baseUrl),
    tokenType: 'Bearer' as const,
    expiresIn: DEFAULT_PLATFORM_TOKEN_TTL_S,
    refreshToken,
    user: publicUser(user),
  };
}
