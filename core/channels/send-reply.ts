// The channel.deliver job: sends one queued reply. 429 and 5xx are retried,
// at the channel's retry_after when it sent one: the attempt ends at once and
// the job waits parked, its worker slot free (core/jobs/park.ts), its queue
// held so the channel's later replies stay behind it. A permanent refusal
// (bot blocked, token revoked) marks the channel 'error' with the reason and stops.
import { z } from 'zod';
import type { Config } from '../config.ts';
import type { Keyring } from '../crypto/keyring.ts';
import { sql, type CommonQueryMethods, type DatabasePool } from '../db/pool.ts';
import { PermanentJobError, RetryableJobError } from '../jobs/errors.ts';
import { adapterFor, fetchForChannel } from './registry.ts';
import { LinkRow, openSettings, recordChannelError } from './store.ts';
import { ChannelSendError } from './types.ts';

export const DeliverInput = z.object({ deliveryId: z.uuid() });

const Delivery = z.object({
  id: z.string(),
  key: z.string(),
  chat_ref: z.string(),
  text: z.string(),
  status: z.string(),
  provider_message_id: z.string().nullable(),
});
const Row = z.object({ d: Delivery, l: LinkRow });

export type DeliverContext = {
  db: DatabasePool;
  config: Config;
  keyring: Keyring;
  tenantId: string;
  attempt: number;
  maxAttempts: number;
  signal: AbortSignal;
  completeWithin: (tx: CommonQueryMethods, result: unknown) => Promise<void>;
};

export async function deliverReply(input: z.infer<typeof DeliverInput>, ctx: DeliverContext): Promise<unknown> {
  const row = await ctx.db.maybeOne(sql.type(Row)`
    select to_jsonb(d) as d, to_jsonb(l) as l from channel_deliveries d join channel_links l on l.id = d.link_id
    where d.id = ${input.deliveryId} and d.tenant_id = ${ctx.tenantId}`);
  if (!row) throw new PermanentJobError('delivery_missing', 'The reply of this job no longer exists.');
  const { d, l } = row;
  if (d.status === 'sent') return { sent: true, messageId: d.provider_message_id };
  const adapter = adapterFor(l.channel);
  if (!adapter || !l.bound_ref || !l.inbound_id) {
    await ctx.db.query(
      sql.unsafe`update channel_deliveries set status = 'failed', error = 'channel disconnected' where id = ${d.id}`,
    );
    throw new PermanentJobError('channel_disconnected', 'The channel was disconnected before the reply was sent.');
  }
  const actx = {
    config: ctx.config,
    settings: openSettings(ctx.keyring, l),
    fetch: fetchForChannel(adapter, ctx.config),
  };
  try {
    const sent = await adapter.send(actx, d.chat_ref, d.text, d.id);
    return await ctx.db.transaction(async (tx) => {
      await tx.query(sql.unsafe`
        update channel_deliveries set status = 'sent', sent_at = now(), provider_message_id = ${sent.messageId}, error = null where id = ${d.id}`);
      await tx.query(sql.unsafe`
        update channel_links set outbound_count = outbound_count + 1, last_outbound_at = now() where id = ${l.id}`);
      const result = { sent: true, messageId: sent.messageId, attempt: ctx.attempt };
      await ctx.completeWithin(tx, result);
      return result;
    });
  } catch (error) {
    if (!(error instanceof ChannelSendError)) throw error;
    if (error.kind === 'permanent') {
      await ctx.db.transaction(async (tx) => {
        await tx.query(
          sql.unsafe`update channel_deliveries set status = 'failed', error = ${error.message} where id = ${d.id}`,
        );
        await recordChannelError(tx, l.id, error.message);
      });
      throw new PermanentJobError('channel_refused', error.message);
    }
    if (ctx.attempt >= ctx.maxAttempts) {
      await ctx.db.query(
        sql.unsafe`update channel_deliveries set status = 'failed', error = ${error.message} where id = ${d.id}`,
      );
      await ctx.db.query(
        sql.unsafe`update channel_links set last_error = ${error.message}, last_error_at = now() where id = ${l.id}`,
      );
    }
    // The next attempt comes at the channel's retry_after (up to a day), else after the backoff.
    throw new RetryableJobError(
      'channel_unavailable',
      error.message,
      error.retryAfterS === null ? undefined : error.retryAfterS * 1000,
    );
  }
}
