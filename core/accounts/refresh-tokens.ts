// Refresh tokens renew the short-lived platform JWT without the password.
// Each is used once: using it returns a new one (rotation). Presenting a
// token that was already used revokes its whole family, since either the
// client or a thief holds a copy.
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { randomToken, sha256 } from '../crypto/tokens.ts';
import { sql, type CommonQueryMethods, type DatabasePool } from '../db/pool.ts';

export const REFRESH_TOKEN_TTL_DAYS = 30;

export async function issueRefreshToken(
  db: CommonQueryMethods,
  userId: string,
  familyId: string = randomUUID(),
): Promise<string> {
  const token = randomToken('rt_');
  await db.query(sql.unsafe`
    insert into auth_refresh_tokens (user_id, token_hash, family_id, expires_at)
    values (${userId}, ${sha256(token)}, ${familyId}, now() + make_interval(days => ${REFRESH_TOKEN_TTL_DAYS}))`);
  return token;
}

export type Rotation = { userId: string; refreshToken: string } | { error: 'invalid' | 'reused' };

export async function rotateRefreshToken(db: DatabasePool, token: string): Promise<Rotation> {
  return db.transaction(async (tx) => {
    const row = await tx.maybeOne(sql.type(
      z.object({
        id: z.string(),
        user_id: z.string(),
        family_id: z.string(),
        used_at: z.string().nullable(),
        revoked_at: z.string().nullable(),
        expired: z.boolean(),
      }),
    )`
      select id, user_id, family_id, used_at, revoked_at, expires_at <= now() as expired
      from auth_refresh_tokens where token_hash = ${sha256(token)} for update`);
    if (!row || row.revoked_at || row.expired) return { error: 'invalid' as const };
    if (row.used_at) {
      await tx.query(
        sql.unsafe`update auth_refresh_tokens set revoked_at = now() where family_id = ${row.family_id} and revoked_at is null`,
      );
      return { error: 'reused' as const };
    }
    await tx.query(sql.unsafe`update auth_refresh_tokens set used_at = now() where id = ${row.id}`);
    return { userId: row.user_id, refreshToken: await issueRefreshToken(tx, row.user_id, row.family_id) };
  });
}

export async function revokeRefreshToken(db: CommonQueryMethods, token: string): Promise<void> {
  await db.query(sql.unsafe`
    update auth_refresh_tokens set revoked_at = now()
    where family_id = (select family_id from auth_refresh_tokens where token_hash = ${sha256(token)}) and revoked_at is null`);
}
