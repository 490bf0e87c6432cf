// Replies to a channel: one channel_deliveries row per key ('turn:<job>' or
// 'refusal:<update>') and one channel.deliver job, written in the transaction
// that produced the reply, so each reply is sent once.
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { sql, type CommonQueryMethods } from '../db/pool.ts';
import { enqueueJobs, type JobSpec } from '../jobs/enqueue.ts';
import { channelQueue, DELIVER_JOB } from './linking.ts';

export type DeliveryInput = { tenantId: string; linkId: string; channel: string; key: string; chatRef: string; text: string };

/** The delivery row (if new) and its job spec, to enqueue in the same transaction. */
export async function prepareDelivery(tx: CommonQueryMethods, d: DeliveryInput): Promise<JobSpec[]> {
  const jobId = randomUUID();
  const id = await tx.maybeOneFirst(sql.type(z.object({ id: z.string() }))`
    insert into channel_deliveries (tenant_id, link_id, key, chat_ref, text, job_id)
    values (${d.tenantId}, ${d.linkId}, ${d.key}, ${d.chatRef}, ${d.text}, ${jobId})
    on conflict (key) do nothing returning id`);
  if (!id) return [];
  return [{ id: jobId, kind: DELIVER_JOB, tenantId: d.tenantId, input: { deliveryId: id }, queueName: channelQueue(d.tenantId, d.channel), maxAttempts: 8 }];
}

const Origin = z.object({ link_id: z.string(), channel: z.string(), chat_ref: z.string() });

/**
 * The chat turn's hook: when the answered message came from a channel, its
 * reply is queued in the turn's own transaction, keyed by the turn. One
 * indexed lookup for turns that did not come from a channel.
 */
export async function enqueueChannelReply(tx: CommonQueryMethods, turn: { tenantId: string; turnJobId: string; userMessageId: string; text: string }): Promise<void> {
  const origin = await tx.maybeOne(sql.type(Origin)`
    select u.link_id, l.channel, u.chat_ref from channel_updates u join channel_links l on l.id = u.link_id
    where u.message_id = ${turn.userMessageId} and u.tenant_id = ${turn.tenantId} and u.chat_ref is not null and l.bound_ref is not null`);
  if (!origin) return;
  const specs = await prepareDelivery(tx, {
    tenantId: turn.tenantId, linkId: origin.link_id, channel: origin.channel, key: `turn:${turn.turnJobId}`, chatRef: origin.chat_ref, text: turn.text,
  });
  await enqueueJobs(tx, specs);
}
