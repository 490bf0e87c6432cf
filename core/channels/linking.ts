// Linking a channel: POST /link starts a pending link (a code, its hash kept)
// and the channel.link job (link-job.ts); the binding (Telegram "/start
// <code>", a webhook message with the session token, Slack's OAuth redirect)
// arrives later and wakes the job, which finishes; at the expiry it ends the
// link as expired.
import { createHash, randomBytes } from 'node:crypto';
import { timeOrderedId } from '../ids.ts';
import { z } from 'zod';
import type { Config } from '../config.ts';
import type { Keyring } from '../crypto/keyring.ts';
import { constantTimeEqual } from '../crypto/tokens.ts';
import { sql, type CommonQueryMethods, type DatabasePool } from '../db/pool.ts';
import { defaultAgent } from '../chat/sessions.ts';
import { enqueueJob } from '../jobs/enqueue.ts';
import { wakeJob } from '../jobs/lifecycle.ts';
import { linkRow, sealSecret, type LinkRow, openSettings } from './store.ts';
import type { ChannelAdapter } from './types.ts';

export const LINK_JOB = 'channel.link';
export const DELIVER_JOB = 'channel.deliver';
export const DISCONNECT_JOB = 'channel.disconnect';
export const CHANNEL_JOB_KINDS = [LINK_JOB, DELIVER_JOB, DISCONNECT_JOB];

/** Jobs of one tenant's channel share a queue: link, replies and disconnect run in order. */
export const channelQueue = (tenantId: string, channel: string) => `channel:${tenantId}:${channel}`;
export const inboundUrl = (config: Config, channel: string, inboundId: string) =>
  `${config.baseUrl}/api/channels/${channel}/inbound/${inboundId}`;
export const hashCode = (code: string) => createHash('sha256').update(code).digest('hex');

export function codeMatches(row: Pick<LinkRow, 'link_code_hash'>, code: string): boolean {
  if (!row.link_code_hash) return false;
  return constantTimeEqual(row.link_code_hash, hashCode(code));
}

export class LinkRefusedError extends Error {
  override name = 'LinkRefusedError';
}

export type LinkStarted = { jobId: string; linkUrl?: string; sessionToken?: string; expiresAt: string };

export async function startLink(
  db: DatabasePool,
  keyring: Keyring,
  config: Config,
  adapter: ChannelAdapter,
  tenantId: string,
  userId: string,
): Promise<LinkStarted> {
  return db.transaction(async (tx) => {
    const row = await tx.maybeOne(
      linkRow`select * from channel_links where tenant_id = ${tenantId} and channel = ${adapter.id} for update`,
    );
    const missing = adapter.requiredForLink.filter((f) => !(row?.config[f] ?? row?.secrets[f]));
    if (!row || missing.length > 0)
      throw new LinkRefusedError(
        `Configure ${adapter.id} first (POST /api/channels/${adapter.id}/config): ${missing.join(', ') || 'settings'} missing.`,
      );
    const code = randomBytes(24).toString('base64url');
    const jobId = timeOrderedId();
    // Telegram echoes this secret in every webhook request; a new link gets a new one.
    const extra =
      adapter.id === 'telegram'
        ? {
            webhookSecret: sealSecret(
              keyring,
              tenantId,
              adapter.id,
              'webhookSecret',
              randomBytes(32).toString('base64url'),
            ),
          }
        : {};
    const updated = await tx.one(linkRow`
      update channel_links set state = 'linking',
        link_prev_state = case when state = 'linking' then link_prev_state else state end,
        link_code_hash = ${hashCode(code)}, link_expires_at = now() + make_interval(secs => ${config.channels.linkTtlS}),
        link_job_id = ${jobId}, link_awaiting = false, linked_by = ${userId},
        secrets = (secrets - 'oauthCode') || ${sql.jsonb(extra)},
        inbound_id = coalesce(inbound_id, gen_random_uuid()), updated_at = now()
      where id = ${row.id} returning *`);
    await enqueueJob(tx, {
      id: jobId,
      kind: LINK_JOB,
      tenantId,
      input: { phase: 'register' },
      queueName: channelQueue(tenantId, adapter.id),
      maxAttempts: 5,
      quota: true,
    });
    return {
      jobId,
      ...adapter.linkTarget(config, openSettings(keyring, updated), code),
      expiresAt: updated.link_expires_at!,
    };
  });
}

/** The binding is there: the link job, waiting for it, runs its last step now. */
export async function wakeLinkJob(tx: CommonQueryMethods, row: Pick<LinkRow, 'link_job_id'>): Promise<void> {
  if (row.link_job_id) await wakeJob(tx, row.link_job_id, 'now');
}

const SessionId = z.object({ id: z.string() });

/** The channel's own chat session, created at its first binding. */
export async function ensureSession(
  tx: CommonQueryMethods,
  row: LinkRow,
  adapter: ChannelAdapter,
  label: string,
): Promise<string> {
  if (row.session_id) {
    const exists = await tx.maybeOneFirst(
      sql.type(SessionId)`select id from chat_sessions where id = ${row.session_id}`,
    );
    if (exists) return exists;
  }
  const agent = await defaultAgent(tx, row.tenant_id);
  return tx.oneFirst(sql.type(SessionId)`
    insert into chat_sessions (tenant_id, title, agent_id, created_by)
    values (${row.tenant_id}, ${`${adapter.title}: ${label}`.slice(0, 200)}, ${agent.id}, ${row.linked_by}) returning id`);
}

/**
 * The binding arrived (inside the inbound transaction, the link row locked):
 * the channel is linked at once, waiters wake by NOTIFY, and the link job's
 * last step is moved to now if it already waits for it.
 */
export async function bindLink(
  tx: CommonQueryMethods,
  row: LinkRow,
  adapter: ChannelAdapter,
  boundRef: string,
  account: Record<string, unknown>,
): Promise<LinkRow> {
  const label = String(account.username ?? account.name ?? boundRef);
  const sessionId = await ensureSession(tx, row, adapter, label);
  const bound = await tx.one(linkRow`
    update channel_links set state = 'linked', bound_ref = ${boundRef}, account = coalesce(account, '{}'::jsonb) || ${sql.jsonb(account as never)},
      session_id = ${sessionId}, linked_at = now(), link_code_hash = null, updated_at = now()
    where id = ${row.id} returning *`);
  if (row.link_awaiting) await wakeLinkJob(tx, row);
  return bound;
}

/** Slack's OAuth redirect: the code is kept sealed for the link job, which exchanges it. */
export async function acceptOAuthCode(
  db: DatabasePool,
  keyring: Keyring,
  channel: string,
  state: string,
  oauthCode: string,
): Promise<boolean> {
  return db.transaction(async (tx) => {
    const row = await tx.maybeOne(linkRow`
      select * from channel_links where channel = ${channel} and link_code_hash = ${hashCode(state)}
        and state = 'linking' and link_expires_at > now() for update`);
    if (!row) return false;
    const sealed = sealSecret(keyring, row.tenant_id, channel, 'oauthCode', oauthCode);
    await tx.query(sql.unsafe`
      update channel_links set secrets = secrets || ${sql.jsonb({ oauthCode: sealed })}, link_code_hash = null, updated_at = now() where id = ${row.id}`);
    if (row.link_awaiting) await wakeLinkJob(tx, row);
    return true;
  });
}
