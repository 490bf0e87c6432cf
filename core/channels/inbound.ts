// An inbound update whose signature was checked: stored once by the channel's
// own id, and in the same transaction (the group committer's) either binds a
// pending link, becomes a chat turn through the chat pipeline (quota,
// credits, model rules of core/chat/send.ts), is answered with the quota
// refusal, or is only kept (channel not enabled, not from the bound chat).
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { sendBatch, SessionNotFoundError } from '../chat/send.ts';
import { sql, type DatabasePool, type DatabaseTransactionConnection } from '../db/pool.ts';
import type { JobSpec } from '../jobs/enqueue.ts';
import type { GroupCommitter } from '../jobs/group-commit.ts';
import { prepareDelivery } from './deliver.ts';
import { bindLink, codeMatches, ensureSession } from './linking.ts';
import { linkRow, type LinkRow } from './store.ts';
import type { ChannelAdapter, InboundParsed } from './types.ts';

export const UPDATE_STATUSES = ['turn', 'refused', 'stored', 'ignored', 'bound'] as const;
export type UpdateStatus = (typeof UPDATE_STATUSES)[number];
export type Accepted = { updateId: string; duplicate: boolean; status: UpdateStatus; jobId: string | null };
type Update = Extract<InboundParsed, { kind: 'update' }>;

const Existing = z.object({ id: z.string(), status: z.enum(UPDATE_STATUSES), turn_job_id: z.string().nullable() });

async function decide(tx: DatabaseTransactionConnection, adapter: ChannelAdapter, linkId: string, update: Update, updateId: string): Promise<{ status: UpdateStatus; jobs: JobSpec[]; messageId?: string; turnJobId?: string }> {
  const link = await tx.one(linkRow`select * from channel_links where id = ${linkId} for update`);
  if (update.linkCode && link.state === 'linking' && !adapter.finishLink && link.link_expires_at && Date.parse(link.link_expires_at) > Date.now() && codeMatches(link, update.linkCode) && update.boundRef) {
    await bindLink(tx, link, adapter, update.boundRef, update.account ?? {});
    return { status: 'bound', jobs: [] };
  }
  const text = update.text?.trim().slice(0, 32_000);
  if (!text || !update.chatRef || !link.bound_ref || update.boundRef !== link.bound_ref) return { status: 'ignored', jobs: [] };
  if (link.state !== 'enabled') return { status: 'stored', jobs: [] };
  return turnFor(tx, adapter, link, update.chatRef, text, updateId);
}

async function turnFor(tx: DatabaseTransactionConnection, adapter: ChannelAdapter, link: LinkRow, chatRef: string, text: string, updateId: string) {
  const sessionId = await ensureSession(tx, link, adapter, chatRef);
  if (sessionId !== link.session_id) await tx.query(sql.unsafe`update channel_links set session_id = ${sessionId} where id = ${link.id}`);
  const [result] = await sendBatch(tx, [{
    tenantId: link.tenant_id,
    userId: link.linked_by as string, // the admin who linked it; null (user deleted) leaves the message without an author
    idempotencyKey: `channel:${updateId}`,
    sessionId,
    message: text,
    attachments: [],
  }]);
  const outcome = result!.value;
  if (outcome instanceof SessionNotFoundError || outcome.kind !== 'accepted') {
    const reason = outcome instanceof SessionNotFoundError ? 'This conversation has no session any more.'
      : outcome.kind === 'refused' ? outcome.refusal.message : 'This message could not be answered.';
    const jobs = await prepareDelivery(tx, { tenantId: link.tenant_id, linkId: link.id, channel: adapter.id, key: `refusal:${updateId}`, chatRef, text: reason });
    return { status: 'refused' as const, jobs };
  }
  return { status: 'turn' as const, jobs: [...result!.jobs], messageId: outcome.body.messageId, turnJobId: outcome.body.jobId };
}

export async function acceptInbound(jobs: GroupCommitter, db: DatabasePool, adapter: ChannelAdapter, link: LinkRow, update: Update): Promise<Accepted> {
  const updateId = randomUUID();
  const { value } = await jobs.submit({
    work: async (tx) => {
      const inserted = await tx.maybeOneFirst(sql.type(z.object({ id: z.string() }))`
        insert into channel_updates (id, tenant_id, link_id, external_id, status, chat_ref, text, payload)
        values (${updateId}, ${link.tenant_id}, ${link.id}, ${update.externalId}, 'stored', ${update.chatRef}, ${update.text}, ${sql.jsonb(update.payload as never)})
        on conflict (link_id, external_id) do nothing returning id`);
      if (!inserted) return null;
      const decided = await decide(tx, adapter, link.id, update, updateId);
      await tx.query(sql.unsafe`
        update channel_updates set status = ${decided.status}, message_id = ${decided.messageId ?? null}, turn_job_id = ${decided.turnJobId ?? null}
        where id = ${updateId}`);
      await tx.query(sql.unsafe`
        update channel_links set inbound_count = inbound_count + 1, last_inbound_at = now() where id = ${link.id}`);
      return { status: decided.status, jobs: decided.jobs, turnJobId: decided.turnJobId ?? null };
    },
    jobs: (v) => v?.jobs ?? [],
  });
  if (value) return { updateId, duplicate: false, status: value.status, jobId: value.turnJobId };
  // Stored before (a retried delivery): nothing new, the same answer.
  const existing = await db.one(sql.type(Existing)`
    select id, status, turn_job_id from channel_updates where link_id = ${link.id} and external_id = ${update.externalId}`);
  return { updateId: existing.id, duplicate: true, status: existing.status, jobId: existing.turn_job_id };
}
