// The channel.link job: first it registers the inbound endpoint at the
// channel (validating the credentials), in its channel's serial queue; then
// it waits, outside the queue, for the binding (Telegram "/start <code>", a
// webhook message with the session token, Slack's OAuth redirect), which
// wakes it at once (linking.ts); at the expiry it ends the link as expired.
// Both waits are written in the same transaction as the link row they read,
// under its lock, so a binding that commits meanwhile always wakes it.
import { z } from 'zod';
import type { Config } from '../config.ts';
import type { Keyring } from '../crypto/keyring.ts';
import { sql, type CommonQueryMethods, type DatabasePool } from '../db/pool.ts';
import { PermanentJobError, RetryableJobError } from '../jobs/errors.ts';
import { adapterFor, fetchForChannel } from './registry.ts';
import { ensureSession, inboundUrl } from './linking.ts';
import { linkRow, openSettings, sealSecret, type LinkRow } from './store.ts';
import { ChannelSendError, type AdapterContext, type ChannelAdapter } from './types.ts';

/** A `phase` in the input still parses (a job may be queued with one) but is not read: the step comes from the link row. */
export const LinkJobInput = z.object({ phase: z.enum(['register', 'finish']).optional() });

type Wait = { delayMs: number; reason: string; progress?: unknown; leaveQueue?: boolean };

/** What the link job needs of its task context (workers/define-task.ts). */
export type LinkJobContext = {
  db: DatabasePool;
  config: Config;
  keyring: Keyring;
  jobId: string;
  tenantId: string;
  attempt: number;
  maxAttempts: number;
  completeWithin: (tx: CommonQueryMethods, result: unknown) => Promise<void>;
  waitWithin: (tx: CommonQueryMethods, wait: Wait) => Promise<void>;
};

const superseded = () => new PermanentJobError('link_superseded', 'A newer link or a disconnect replaced this one.');

/** Restores the state the channel had before this link, and says why it ended. */
async function endLink(ctx: LinkJobContext, linkId: string, error: { state: 'error' | 'previous'; reason: string }) {
  await ctx.db.query(sql.unsafe`
    update channel_links set
      state = case when ${error.state} = 'error' then 'error' else coalesce(link_prev_state, 'not_linked') end,
      last_error = case when ${error.state} = 'error' then ${error.reason} else last_error end,
      last_error_at = case when ${error.state} = 'error' then now() else last_error_at end,
      link_code_hash = null, link_awaiting = false, secrets = secrets - 'oauthCode', updated_at = now()
    where id = ${linkId} and link_job_id = ${ctx.jobId} and state = 'linking'`);
}

/** The link row, locked, while this job is still its link's. */
const lockedLink = (tx: CommonQueryMethods, ctx: LinkJobContext, linkId: string) =>
  tx.maybeOne(linkRow`select * from channel_links where id = ${linkId} and link_job_id = ${ctx.jobId} for update`);

/** Waits for the binding until the link's expiry (at once when it is there). */
const awaitBinding = (tx: CommonQueryMethods, ctx: LinkJobContext, expiresAt: string, now: boolean) =>
  ctx.waitWithin(tx, {
    delayMs: now ? 0 : Math.max(0, Date.parse(expiresAt) - Date.now()),
    reason: 'waiting for the channel binding',
    progress: { stage: 'awaiting_binding', expiresAt },
    leaveQueue: true,
  });

export async function runLinkJob(ctx: LinkJobContext): Promise<unknown> {
  const row = await ctx.db.maybeOne(
    linkRow`select * from channel_links where link_job_id = ${ctx.jobId} and tenant_id = ${ctx.tenantId}`,
  );
  const adapter = row ? adapterFor(row.channel) : undefined;
  if (!row || !adapter) throw superseded();
  const actx = (): AdapterContext => ({
    config: ctx.config,
    settings: openSettings(ctx.keyring, row),
    fetch: fetchForChannel(adapter, ctx.config),
  });
  try {
    return row.link_awaiting ? await finish(ctx, row, adapter, actx) : await register(ctx, row, adapter, actx);
  } catch (error) {
    if (!(error instanceof ChannelSendError)) throw error;
    const final = error.kind === 'permanent' || ctx.attempt >= ctx.maxAttempts;
    if (final) await endLink(ctx, row.id, { state: 'error', reason: error.message });
    if (error.kind === 'permanent') throw new PermanentJobError('channel_refused', error.message);
    throw new RetryableJobError('channel_unavailable', error.message);
  }
}

async function register(
  ctx: LinkJobContext,
  row: LinkRow,
  adapter: ChannelAdapter,
  actx: () => AdapterContext,
): Promise<unknown> {
  const registered = await adapter.register(actx(), inboundUrl(ctx.config, adapter.id, row.inbound_id!));
  return ctx.db.transaction(async (tx) => {
    const now = await lockedLink(tx, ctx, row.id);
    if (!now) throw superseded();
    // The wait first: a binding that sees link_awaiting once this commits finds the job waiting, and wakes it.
    await awaitBinding(tx, ctx, now.link_expires_at!, now.state !== 'linking' || 'oauthCode' in now.secrets);
    await tx.query(sql.unsafe`
      update channel_links set link_awaiting = true, updated_at = now(),
        account = coalesce(account, '{}'::jsonb) || ${sql.jsonb((registered.account ?? {}) as never)}
      where id = ${row.id}`);
    return null;
  });
}

async function finish(
  ctx: LinkJobContext,
  row: LinkRow,
  adapter: ChannelAdapter,
  actx: () => AdapterContext,
): Promise<unknown> {
  if (row.state === 'linking' && 'oauthCode' in row.secrets && adapter.finishLink) {
    const done = await adapter.finishLink(actx());
    return ctx.db.transaction(async (tx) => {
      const sealed = Object.fromEntries(
        Object.entries(done.secrets).map(([k, v]) => [k, sealSecret(ctx.keyring, row.tenant_id, row.channel, k, v)]),
      );
      const sessionId = await ensureSession(tx, row, adapter, String(done.account.teamName ?? done.boundRef));
      const bound = await tx.maybeOne(linkRow`
        update channel_links set state = 'linked', bound_ref = ${done.boundRef}, account = ${sql.jsonb(done.account as never)},
          secrets = (secrets - 'oauthCode') || ${sql.jsonb(sealed)}, session_id = ${sessionId}, linked_at = now(),
          link_awaiting = false, last_error = null, updated_at = now()
        where id = ${row.id} and link_job_id = ${ctx.jobId} and state = 'linking' returning *`);
      if (!bound) throw superseded();
      const result = { state: 'linked', account: done.account };
      await ctx.completeWithin(tx, result);
      return result;
    });
  }
  const outcome = await ctx.db.transaction(async (tx) => {
    const now = await lockedLink(tx, ctx, row.id);
    if (!now) throw superseded();
    if (now.state !== 'linking') {
      await tx.query(sql.unsafe`update channel_links set link_awaiting = false where id = ${row.id}`);
      const result = { state: now.state, account: now.account };
      await ctx.completeWithin(tx, result);
      return result;
    }
    if (now.link_expires_at && Date.parse(now.link_expires_at) <= Date.now() + 500) return 'expired' as const;
    // Woken before the binding (an early wake-up): wait for it again.
    await awaitBinding(tx, ctx, now.link_expires_at!, false);
    return null;
  });
  if (outcome !== 'expired') return outcome;
  await endLink(ctx, row.id, { state: 'previous', reason: 'link expired' });
  throw new PermanentJobError('link_expired', 'Nobody completed the link before it expired; start a new one.');
}
