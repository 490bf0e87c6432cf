// altidp's server-to-server notifications (e-mail relay on/off, consent
// revoked, account deleted at the provider). The route verifies the JWS and
// stores each notification once (by its jti) with its job in one commit; the
// job applies it. Unknown event types are stored as ignored.
import { z } from 'zod';
import type { JWTPayload } from 'jose';
import { deleteAccount } from '../accounts/users.ts';
import { sha256 } from '../crypto/tokens.ts';
import { sql, type DatabasePool } from '../db/pool.ts';
import { hasOtherSignIn } from './accounts.ts';
import { enqueueSystemJob } from '../jobs/enqueue.ts';

export const ALTIDP_NOTIFICATION_JOB = 'auth.altidp-notification';
export const KNOWN_EVENTS = ['email-disabled', 'email-enabled', 'consent-revoked', 'account-delete'] as const;

const EventClaim = z
  .object({
    type: z.string().min(1).max(100),
    sub: z.string().min(1).max(500).optional(),
    email: z.string().max(320).optional(),
    event_time: z.number().optional(),
  })
  .loose();

/** The `events` claim: a JSON string (as altidp sends it) or an object. */
export function eventOf(payload: JWTPayload): z.infer<typeof EventClaim> | null {
  let events: unknown = payload.events;
  if (typeof events === 'string') {
    try {
      events = JSON.parse(events);
    } catch {
      return null;
    }
  }
  const parsed = EventClaim.safeParse(events);
  return parsed.success ? parsed.data : null;
}

const Stored = z.object({ id: z.string(), status: z.string() });

export type StoredNotification = { id: string; duplicate: boolean; status: string };

export async function storeNotification(
  db: DatabasePool,
  jws: string,
  payload: JWTPayload,
  event: z.infer<typeof EventClaim>,
): Promise<StoredNotification> {
  const known = (KNOWN_EVENTS as readonly string[]).includes(event.type);
  const dedupeKey = typeof payload.jti === 'string' && payload.jti ? `jti:${payload.jti}` : `sha256:${sha256(jws)}`;
  return db.transaction(async (tx) => {
    const inserted = await tx.maybeOne(sql.type(Stored)`
      insert into altidp_notifications (dedupe_key, event_type, subject, claims, status, outcome, applied_at)
      values (${dedupeKey}, ${event.type}, ${event.sub ?? payload.sub ?? null}, ${sql.jsonb(payload as never)},
              ${known ? 'queued' : 'ignored'}, ${known ? null : 'unknown_event_type'}, ${known ? null : sql.fragment`now()`})
      on conflict (dedupe_key) do nothing
      returning id, status`);
    if (!inserted) {
      const existing = await tx.one(
        sql.type(Stored)`select id, status from altidp_notifications where dedupe_key = ${dedupeKey}`,
      );
      return { ...existing, duplicate: true };
    }
    if (known) {
      await enqueueSystemJob(tx, {
        kind: ALTIDP_NOTIFICATION_JOB,
        payload: { notificationId: String(inserted.id) },
        key: `altidp-notification:${inserted.id}`,
        maxAttempts: 10,
      });
    }
    return { ...inserted, duplicate: false };
  });
}

const Pending = z.object({ id: z.string(), event_type: z.string(), subject: z.string().nullable() });
const UserId = z.object({ user_id: z.string() });

/**
 * Applies a stored notification once (the row is locked and must still be
 * queued): consent-revoked unlinks the identity and revokes the user's
 * refresh tokens; account-delete does the same and deletes the account when
 * nothing else signs it in; email-disabled/enabled are recorded on the identity.
 */
export async function applyNotification(db: DatabasePool, id: string): Promise<{ outcome: string } | null> {
  return db.transaction(async (tx) => {
    const row = await tx.maybeOne(sql.type(Pending)`
      select id, event_type, subject from altidp_notifications where id = ${id} and status = 'queued' for update`);
    if (!row) return null;
    const userId = row.subject
      ? await tx.maybeOneFirst(
          sql.type(UserId)`select user_id from user_identities where provider = 'altidp' and subject = ${row.subject}`,
        )
      : null;
    let outcome = 'no_identity';
    if (userId) {
      switch (row.event_type) {
        case 'email-disabled':
        case 'email-enabled':
          await tx.query(sql.unsafe`
            update user_identities set email_status = ${row.event_type === 'email-disabled' ? 'disabled' : 'enabled'}, updated_at = now()
            where provider = 'altidp' and subject = ${row.subject}`);
          outcome = row.event_type === 'email-disabled' ? 'email_disabled' : 'email_enabled';
          break;
        case 'consent-revoked':
        case 'account-delete': {
          await tx.query(
            sql.unsafe`delete from user_identities where provider = 'altidp' and subject = ${row.subject}`,
          );
          await tx.query(
            sql.unsafe`update auth_refresh_tokens set revoked_at = now() where user_id = ${userId} and revoked_at is null`,
          );
          outcome = 'identity_unlinked';
          if (row.event_type === 'account-delete' && !(await hasOtherSignIn(tx, userId))) {
            await deleteAccount(tx, userId);
            outcome = 'account_deleted';
          }
          break;
        }
      }
    }
    await tx.query(
      sql.unsafe`update altidp_notifications set status = 'applied', outcome = ${outcome}, applied_at = now() where id = ${row.id}`,
    );
    return { outcome };
  });
}
