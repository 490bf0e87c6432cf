// The channel.deliver job: sends one queued reply. 429 and 5xx are retried,
// honouring the channel's retry_after (short waits inside the attempt; a
// longer one schedules the next attempt at that time); a permanent refusal (bot blocked, token
// revoked) marks the channel 'error' with the reason and stops.
import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import type { Config } from '../config.ts';
import type { Keyring } from '../crypto/keyring.ts';
import { sql, type CommonQueryMethods, type DatabasePool } from '../db/pool.ts';
import { PermanentJobError, RetryableJobError } from '../jobs/errors.ts';
import { adapterFor, fetchForChannel } from './registry.ts';
import { LinkRow, openSettings, recordChannelError } from './store.ts';
import { ChannelSendError } from './types.ts';

export const DeliverInput = z.object({ deliveryId: z.uuid() });

const Delivery = z.object({ id: z.string(), key: z.string(), chat_ref: z.string(), text: z.string(), status: z.string(), provider_message_id: z.string().nullable() });
const Row = z.object({ d: Delivery, l: LinkRow });

/** Waits inside one attempt at most this long for a retry_after; longer ones go back to the queue. */
const MAX_INLINE_WAIT_S = 30;
const INLINE_TRIES = 4;
/** A longer retry_after than this is capped (a day): a reply that late is still sent, not lost. */
const MAX_RETRY_AFTER_S = 86_400;

export type DeliverContext = {
  db: DatabasePool;
  config: Config;
  keyring: Keyring;
  tenantId: string;
  attempt: number;
  maxAttempts: number;
  signal: AbortSignal;
  completeWithin: (tx: CommonQueryMethods, result: unknown) => Promise<void>;
  /** The Graphile job running this attempt (to schedule its retry at the channel's retry_after). */
  graphileJob?: { id: string; lockedBy: string | null };
};

/**
 * Graphile retries a failed job at greatest(now(), run_at) + exp(least(attempts, 10)) s
 * (its fail_job). Setting run_at (the job is ours while locked) so that this
 * lands at the channel's retry time makes the next attempt wait retry_after,
 * not the backoff; if the backoff is longer anyway, it wins.
 */
async function retryNoSoonerThan(db: CommonQueryMethods, job: NonNullable<DeliverContext['graphileJob']>, waitS: number): Promise<void> {
  await db.query(sql.unsafe`
    update graphile_worker._private_jobs
    set run_at = now() + make_interval(secs => ${waitS}) - exp(least(attempts, 10)) * interval '1 second'
    where id = ${job.id} and locked_by is not distinct from ${job.lockedBy}`);
}

export async function deliverReply(input: z.infer<typeof DeliverInput>, ctx: DeliverContext): Promise<unknown> {
  const row = await ctx.db.maybeOne(sql.type(Row)`
    select to_jsonb(d) as d, to_jsonb(l) as l from channel_deliveries d join channel_links l on l.id = d.link_id
    where d.id = ${input.deliveryId} and d.tenant_id = ${ctx.tenantId}`);
  if (!row) throw new PermanentJobError('delivery_missing', 'The reply of this job no longer exists.');
  const { d, l } = row;
  if (d.status === 'sent') return { sent: true, messageId: d.provider_message_id };
  const adapter = adapterFor(l.channel);
  if (!adapter || !l.bound_ref || !l.inbound_id) {
    await ctx.db.query(sql.unsafe`update channel_deliveries set status = 'failed', error = 'channel disconnected' where id = ${d.id}`);
    throw new PermanentJobError('channel_disconnected', 'The channel was disconnected before the reply was sent.');
  }
  const actx = { config: ctx.config, settings: openSettings(ctx.keyring, l), fetch: fetchForChannel(adapter, ctx.config) };
  for (let tries = 1; ; tries++) {
    try {
      const sent = await adapter.send(actx, d.chat_ref, d.text, d.id);
      return await ctx.db.transaction(async (tx) => {
        await tx.query(sql.unsafe`
          update channel_deliveries set status = 'sent', sent_at = now(), provider_message_id = ${sent.messageId}, error = null where id = ${d.id}`);
        await tx.query(sql.unsafe`
          update channel_links set outbound_count = outbound_count + 1, last_outbound_at = now() where id = ${l.id}`);
        const result = { sent: true, messageId: sent.messageId, tries };
        await ctx.completeWithin(tx, result);
        return result;
      });
    } catch (error) {
      if (!(error instanceof ChannelSendError)) throw error;
      if (error.kind === 'permanent') {
        await ctx.db.transaction(async (tx) => {
          await tx.query(sql.unsafe`update channel_deliveries set status = 'failed', error = ${error.message} where id = ${d.id}`);
          await recordChannelError(tx, l.id, error.message);
        });
        throw new PermanentJobError('channel_refused', error.message);
      }
      const wait = error.retryAfterS;
      if (wait !== null && wait <= MAX_INLINE_WAIT_S && tries < INLINE_TRIES && !ctx.signal.aborted) {
        await sleep(Math.max(wait, 0.05) * 1000, undefined, { signal: ctx.signal }).catch(() => undefined);
        continue;
      }
      if (ctx.attempt >= ctx.maxAttempts) {
        await ctx.db.query(sql.unsafe`update channel_deliveries set status = 'failed', error = ${error.message} where id = ${d.id}`);
        await ctx.db.query(sql.unsafe`update channel_links set last_error = ${error.message}, last_error_at = now() where id = ${l.id}`);
      } else if (wait !== null && wait > 0 && ctx.graphileJob) {
        await retryNoSoonerThan(ctx.db, ctx.graphileJob, Math.min(wait, MAX_RETRY_AFTER_S));
      }
      throw new RetryableJobError('channel_unavailable', error.message);
    }
  }
}
