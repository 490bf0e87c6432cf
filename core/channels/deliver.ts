// Replies to a channel: one channel_deliveries row per key ('turn:<job>',
// 'failure:<job>' or 'refusal:<update>') and one channel.deliver job, written
// in the transaction that produced the reply, so each reply is sent once.
// Delivery jobs carry the chat session, so they show in its activity.
import { timeOrderedId } from '../ids.ts';
import { z } from 'zod';
import { sql, type CommonQueryMethods, type DatabasePool } from '../db/pool.ts';
import { enqueueJobs, type JobSpec } from '../jobs/enqueue.ts';
import { channelQueue, DELIVER_JOB } from './linking.ts';

export type DeliveryInput = {
  tenantId: string;
  linkId: string;
  channel: string;
  key: string;
  chatRef: string;
  text: string;
  sessionId: string | null;
};

/** The delivery rows (those new by key) and their job specs by key, to enqueue in the same transaction: one statement. */
export async function prepareDeliveries(
  tx: CommonQueryMethods,
  inputs: readonly DeliveryInput[],
): Promise<Map<string, JobSpec>> {
  if (inputs.length === 0) return new Map();
  const rows = inputs.map((d) => ({
    tenant_id: d.tenantId,
    link_id: d.linkId,
    key: d.key,
    chat_ref: d.chatRef,
    text: d.text,
    job_id: timeOrderedId(),
  }));
  const created = await tx.any(sql.type(z.object({ id: z.string(), key: z.string(), job_id: z.string() }))`
    insert into channel_deliveries (tenant_id, link_id, key, chat_ref, text, job_id)
    select tenant_id, link_id, key, chat_ref, text, job_id
    from jsonb_to_recordset(${sql.jsonb(rows as never)}) as r(tenant_id uuid, link_id uuid, key text, chat_ref text, text text, job_id uuid)
    on conflict (key) do nothing returning id, key, job_id`);
  const byKey = new Map(inputs.map((d) => [d.key, d]));
  return new Map(
    created.map((c) => {
      const d = byKey.get(c.key)!;
      const spec: JobSpec = {
        id: c.job_id,
        kind: DELIVER_JOB,
        tenantId: d.tenantId,
        input: { deliveryId: c.id },
        queueName: channelQueue(d.tenantId, d.channel),
        maxAttempts: 8,
        ...(d.sessionId ? { sessionId: d.sessionId } : {}),
      };
      return [c.key, spec];
    }),
  );
}

const Origin = z.object({ link_id: z.string(), channel: z.string(), chat_ref: z.string(), session_id: z.string() });

async function originOf(tx: CommonQueryMethods, tenantId: string, userMessageId: string) {
  return tx.maybeOne(sql.type(Origin)`
    select u.link_id, l.channel, u.chat_ref, m.session_id from channel_updates u
    join channel_links l on l.id = u.link_id join chat_messages m on m.id = u.message_id
    where u.message_id = ${userMessageId} and u.tenant_id = ${tenantId} and u.chat_ref is not null and l.bound_ref is not null`);
}

/**
 * The chat turn's hook: when the answered message came from a channel, its
 * reply is queued in the turn's own transaction, keyed by the turn. One
 * indexed lookup for turns that did not come from a channel.
 */
export async function enqueueChannelReply(
  tx: CommonQueryMethods,
  turn: { tenantId: string; turnJobId: string; userMessageId: string; text: string },
): Promise<void> {
  const origin = await originOf(tx, turn.tenantId, turn.userMessageId);
  if (!origin) return;
  const specs = await prepareDeliveries(tx, [
    {
      tenantId: turn.tenantId,
      linkId: origin.link_id,
      channel: origin.channel,
      key: `turn:${turn.turnJobId}`,
      chatRef: origin.chat_ref,
      text: turn.text,
      sessionId: origin.session_id,
    },
  ]);
  await enqueueJobs(tx, [...specs.values()]);
}

export const TURN_FAILED_TEXT =
  'Sorry, something went wrong and this message could not be answered. Please try again later.';

/**
 * A turn that failed for good (model error after its retries): the person
 * on the channel gets a short apology instead of silence. Keyed by the turn,
 * so it is sent once however often this runs.
 */
export async function enqueueChannelFailure(
  db: DatabasePool,
  turn: { tenantId: string; turnJobId: string; userMessageId: string },
): Promise<boolean> {
  return db.transaction(async (tx) => {
    const origin = await originOf(tx, turn.tenantId, turn.userMessageId);
    if (!origin) return false;
    const specs = await prepareDeliveries(tx, [
      {
        tenantId: turn.tenantId,
        linkId: origin.link_id,
        channel: origin.channel,
        key: `failure:${turn.turnJobId}`,
        chatRef: origin.chat_ref,
        text: TURN_FAILED_TEXT,
        sessionId: origin.session_id,
      },
    ]);
    await enqueueJobs(tx, [...specs.values()]);
    return specs.size > 0;
  });
}
