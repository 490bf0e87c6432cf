// The channel.link job in two steps that run as separate Graphile jobs of the
// same platform job: 'register' (validate the credentials, register the
// inbound endpoint) and 'finish' (scheduled at the expiry, moved to now by
// the binding). Between them the platform job waits as 'queued' with
// progress {stage: 'awaiting_binding'}. Each step fences its writes by the
// job's attempt count, which it raises when it starts.
import { z } from 'zod';
import type { Config } from '../config.ts';
import type { Keyring } from '../crypto/keyring.ts';
import { sql, type DatabasePool } from '../db/pool.ts';
import { completeJob, failAttempt } from '../jobs/lifecycle.ts';
import { adapterFor, fetchForChannel } from './registry.ts';
import { inboundUrl, scheduleLinkFinish, ensureSession } from './linking.ts';
import { linkRow, openSettings, sealSecret, type LinkRow } from './store.ts';
import { ChannelSendError } from './types.ts';

export const LinkJobInput = z.object({ phase: z.enum(['register', 'finish']) });

export type LinkStepContext = { db: DatabasePool; config: Config; keyring: Keyring; jobId: string; tenantId: string; final: boolean };

/** Outcome for the task wrapper: retry (rethrow to Graphile) or done. */
export class RetryLinkStep extends Error {
  override name = 'RetryLinkStep';
}

async function fence(db: DatabasePool, jobId: string): Promise<number | null> {
  return db.maybeOneFirst(sql.type(z.object({ attempts: z.number() }))`
    update jobs set status = 'running', attempts = attempts + 1, started_at = coalesce(started_at, now())
    where id = ${jobId} and status in ('queued', 'running') returning attempts`);
}

async function fail(db: DatabasePool, ctx: LinkStepContext, attempt: number, code: string, message: string, final: boolean) {
  await failAttempt(db, ctx.jobId, attempt, { code, message }, final);
}

/** Restores the state the channel had before this link, and says why it ended. */
async function endLink(ctx: LinkStepContext, linkId: string, error: { state: 'error' | 'previous'; reason: string }) {
  await ctx.db.query(sql.unsafe`
    update channel_links set
      state = case when ${error.state} = 'error' then 'error' else coalesce(link_prev_state, 'not_linked') end,
      last_error = case when ${error.state} = 'error' then ${error.reason} else last_error end,
      last_error_at = case when ${error.state} = 'error' then now() else last_error_at end,
      link_code_hash = null, link_awaiting = false, secrets = secrets - 'oauthCode', updated_at = now()
    where id = ${linkId} and link_job_id = ${ctx.jobId} and state = 'linking'`);
}

export async function runLinkStep(phase: 'register' | 'finish', ctx: LinkStepContext): Promise<void> {
  const attempt = await fence(ctx.db, ctx.jobId);
  if (attempt === null) return; // final already (cancelled, superseded)
  const row = await ctx.db.maybeOne(linkRow`select * from channel_links where link_job_id = ${ctx.jobId} and tenant_id = ${ctx.tenantId}`);
  const adapter = row ? adapterFor(row.channel) : undefined;
  if (!row || !adapter) return fail(ctx.db, ctx, attempt, 'link_superseded', 'A newer link or a disconnect replaced this one.', true);
  const actx = () => ({ config: ctx.config, settings: openSettings(ctx.keyring, row), fetch: fetchForChannel(adapter, ctx.config) });
  try {
    if (phase === 'register') {
      const registered = await adapter.register(actx(), inboundUrl(ctx.config, adapter.id, row.inbound_id!));
      await ctx.db.transaction(async (tx) => {
        // The job row first (as a cancel does, then the link): a cancelled job stays cancelled.
        const still = await tx.query(sql.unsafe`
          update jobs set status = 'queued', progress = ${sql.jsonb({ stage: 'awaiting_binding', expiresAt: row.link_expires_at })}
          where id = ${ctx.jobId} and attempts = ${attempt} and status = 'running'`);
        if (still.rowCount === 0) return;
        const now = await tx.maybeOne(linkRow`select * from channel_links where id = ${row.id} and link_job_id = ${ctx.jobId} for update`);
        if (!now) return failAttempt(tx, ctx.jobId, attempt, { code: 'link_superseded', message: 'A newer link or a disconnect replaced this one.' }, true);
        await tx.query(sql.unsafe`
          update channel_links set link_awaiting = true, updated_at = now(),
            account = coalesce(account, '{}'::jsonb) || ${sql.jsonb((registered.account ?? {}) as never)}
          where id = ${row.id}`);
        const ready = now.state !== 'linking' || 'oauthCode' in now.secrets;
        await scheduleLinkFinish(tx, now, ready ? 'now' : now.link_expires_at!);
      });
      return;
    }
    await finish(ctx, row, attempt, actx);
  } catch (error) {
    if (!(error instanceof ChannelSendError)) throw error;
    const final = error.kind === 'permanent' || ctx.final;
    if (final) await endLink(ctx, row.id, { state: 'error', reason: error.message });
    await fail(ctx.db, ctx, attempt, error.kind === 'permanent' ? 'channel_refused' : 'channel_unavailable', error.message, final);
    if (!final) throw new RetryLinkStep(error.message);
  }
}

async function finish(ctx: LinkStepContext, row: LinkRow, attempt: number, actx: () => Parameters<NonNullable<ReturnType<typeof adapterFor>>['register']>[0]) {
  const adapter = adapterFor(row.channel)!;
  if (row.state === 'linking' && 'oauthCode' in row.secrets && adapter.finishLink) {
    const done = await adapter.finishLink(actx());
    await ctx.db.transaction(async (tx) => {
      const sealed = Object.fromEntries(Object.entries(done.secrets).map(([k, v]) => [k, sealSecret(ctx.keyring, row.tenant_id, row.channel, k, v)]));
      const sessionId = await ensureSession(tx, row, adapter, String(done.account.teamName ?? done.boundRef));
      const bound = await tx.maybeOne(linkRow`
        update channel_links set state = 'linked', bound_ref = ${done.boundRef}, account = ${sql.jsonb(done.account as never)},
          secrets = (secrets - 'oauthCode') || ${sql.jsonb(sealed)}, session_id = ${sessionId}, linked_at = now(),
          link_awaiting = false, last_error = null, updated_at = now()
        where id = ${row.id} and link_job_id = ${ctx.jobId} and state = 'linking' returning *`);
      if (bound) await completeJob(tx, ctx.jobId, attempt, { state: 'linked', account: done.account });
    });
    return;
  }
  if (row.state !== 'linking') {
    await ctx.db.query(sql.unsafe`update channel_links set link_awaiting = false where id = ${row.id}`);
    await completeJob(ctx.db, ctx.jobId, attempt, { state: row.state, account: row.account });
    return;
  }
  if (row.link_expires_at && Date.parse(row.link_expires_at) <= Date.now() + 500) {
    await endLink(ctx, row.id, { state: 'previous', reason: 'link expired' });
    await fail(ctx.db, ctx, attempt, 'link_expired', 'Nobody completed the link before it expired; start a new one.', true);
    return;
  }
  // Woken before the binding (a stale wake-up): wait for it again.
  await ctx.db.transaction(async (tx) => {
    const still = await tx.query(sql.unsafe`update jobs set status = 'queued' where id = ${ctx.jobId} and attempts = ${attempt} and status = 'running'`);
    if (still.rowCount > 0) await scheduleLinkFinish(tx, row, row.link_expires_at!);
  });
}
