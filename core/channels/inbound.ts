// Inbound updates whose signatures were checked, accepted many at a time (the
// group committer's batch path, like chat sends): each is stored once by the
// channel's own id, and in the same transaction either binds a pending link,
// becomes a chat turn through the chat pipeline (quota, credits, model rules
// of core/chat/send.ts), is answered with the refusal, or is only kept
// (channel not enabled, not from the bound chat). A batch costs a handful of
// statements whatever its size.
//
// Locks: the common path takes no lock on the link row before the chat
// pipeline's own (the tenant's message counter), and then only the
// NO KEY UPDATE of the counters, which the foreign keys' KEY SHARE locks do
// not conflict with. (Taking FOR UPDATE on the link after inserting an update
// that references it deadlocked two concurrent batches.) Only a binding or a
// missing session locks the link first.
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { sendBatch, SessionNotFoundError, type SendInput } from '../chat/send.ts';
import { sql, type DatabaseTransactionConnection } from '../db/pool.ts';
import type { JobSpec } from '../jobs/enqueue.ts';
import type { BatchHandler } from '../jobs/group-commit.ts';
import { prepareDeliveries, type DeliveryInput } from './deliver.ts';
import { bindLink, codeMatches, ensureSession } from './linking.ts';
import { linkRow } from './store.ts';
import type { ChannelAdapter, InboundParsed } from './types.ts';

export const UPDATE_STATUSES = ['turn', 'refused', 'stored', 'ignored', 'bound'] as const;
export type UpdateStatus = (typeof UPDATE_STATUSES)[number];
export type Accepted = { updateId: string; duplicate: boolean; status: UpdateStatus; jobId: string | null };
export type Update = Extract<InboundParsed, { kind: 'update' }>;
export type InboundInput = { adapter: ChannelAdapter; linkId: string; update: Update };

/** The link was deleted between the signature check and the batch. */
export class LinkGoneError extends Error {
  override name = 'LinkGoneError';
}

type Item = {
  input: InboundInput;
  updateId: string;
  isNew: boolean;
  status: UpdateStatus;
  messageId: string | null;
  turnJobId: string | null;
  jobs: JobSpec[];
};

const Existing = z.object({
  link_id: z.string(),
  external_id: z.string(),
  id: z.string(),
  status: z.enum(UPDATE_STATUSES),
  turn_job_id: z.string().nullable(),
});

const lockLink = (tx: DatabaseTransactionConnection, id: string) =>
  tx.one(linkRow`select * from channel_links where id = ${id} for no key update`);

export const acceptInboundBatch: BatchHandler<InboundInput, Accepted | LinkGoneError> = async (tx, inputs) => {
  const linkIds = [...new Set(inputs.map((i) => i.linkId))];
  const links = new Map(
    (await tx.any(linkRow`select * from channel_links where id = any(${sql.array(linkIds, 'uuid')})`)).map((l) => [
      l.id,
      l,
    ]),
  );
  const items: Item[] = inputs.map((input) => ({
    input,
    updateId: randomUUID(),
    isNew: false,
    status: 'stored',
    messageId: null,
    turnJobId: null,
    jobs: [],
  }));
  const live = items.filter((it) => links.has(it.input.linkId));

  // 1. Store every update once by (link, channel id); a repeat, in this batch or before, is not new.
  const rows = live.map(({ input: { linkId, update: u }, updateId }) => ({
    id: updateId,
    tenant_id: links.get(linkId)!.tenant_id,
    link_id: linkId,
    external_id: u.externalId,
    chat_ref: u.chatRef,
    text: u.text,
    payload: u.payload ?? null,
  }));
  const inserted = new Set(
    rows.length === 0
      ? []
      : await tx.anyFirst(sql.type(z.object({ id: z.string() }))`
    insert into channel_updates (id, tenant_id, link_id, external_id, status, chat_ref, text, payload)
    select id, tenant_id, link_id, external_id, 'stored', chat_ref, text, coalesce(payload, 'null'::jsonb)
    from rows from (jsonb_to_recordset(${sql.jsonb(rows as never)})
      as (id uuid, tenant_id uuid, link_id uuid, external_id text, chat_ref text, text text, payload jsonb)) with ordinality
      as r(id, tenant_id, link_id, external_id, chat_ref, text, payload, n)
    order by n
    on conflict (link_id, external_id) do nothing returning id`),
  );
  for (const it of live) it.isNew = inserted.has(it.updateId);

  // 2. Decide each new update in arrival order (a binding changes what follows it).
  const turns: Array<{ item: Item; send: SendInput }> = [];
  const refusals: Array<{ item: Item; delivery: DeliveryInput }> = [];
  for (const it of live) {
    if (!it.isNew) continue;
    const { adapter, update } = it.input;
    let link = links.get(it.input.linkId)!;
    if (update.linkCode && update.boundRef && link.state === 'linking' && !adapter.finishLink) {
      link = await lockLink(tx, link.id); // a binding is decided on the locked, current row
      links.set(link.id, link);
      if (
        link.state === 'linking' &&
        link.link_expires_at &&
        Date.parse(link.link_expires_at) > Date.now() &&
        codeMatches(link, update.linkCode)
      ) {
        links.set(link.id, await bindLink(tx, link, adapter, update.boundRef, update.account ?? {}));
        it.status = 'bound';
        continue;
      }
    }
    const text = update.text?.trim().slice(0, 32_000);
    if (!text || !update.chatRef || !link.bound_ref || update.boundRef !== link.bound_ref) it.status = 'ignored';
    else if (link.state !== 'enabled') it.status = 'stored';
    else {
      if (!link.session_id) {
        link = await lockLink(tx, link.id);
        const sessionId = await ensureSession(tx, link, adapter, update.chatRef);
        if (sessionId !== link.session_id)
          link = await tx.one(
            linkRow`update channel_links set session_id = ${sessionId} where id = ${link.id} returning *`,
          );
        links.set(link.id, link);
      }
      turns.push({
        item: it,
        send: {
          tenantId: link.tenant_id,
          userId: link.linked_by as string, // the admin who linked it; null (user deleted) leaves the message without an author
          idempotencyKey: `channel:${it.updateId}`,
          sessionId: link.session_id!,
          message: text,
          attachments: [],
        },
      });
    }
  }

  // 3. All turns through the chat pipeline at once; refusals are answered to the channel's user.
  const sent =
    turns.length === 0
      ? []
      : await sendBatch(
          tx,
          turns.map((t) => t.send),
          true,
        );
  turns.forEach(({ item, send }, i) => {
    const outcome = sent[i]!.value;
    if (!(outcome instanceof SessionNotFoundError) && outcome.kind === 'accepted') {
      Object.assign(item, {
        status: 'turn',
        messageId: outcome.body.messageId,
        turnJobId: outcome.body.jobId,
        jobs: [...sent[i]!.jobs],
      });
      return;
    }
    const reason =
      outcome instanceof SessionNotFoundError
        ? 'This conversation has no session any more.'
        : outcome.kind === 'refused'
          ? outcome.refusal.message
          : 'This message could not be answered.';
    const link = links.get(item.input.linkId)!;
    item.status = 'refused';
    refusals.push({
      item,
      delivery: {
        tenantId: link.tenant_id,
        linkId: link.id,
        channel: item.input.adapter.id,
        key: `refusal:${item.updateId}`,
        chatRef: item.input.update.chatRef!,
        text: reason,
        sessionId: outcome instanceof SessionNotFoundError ? null : send.sessionId,
      },
    });
  });
  const deliveryJobs = await prepareDeliveries(
    tx,
    refusals.map((r) => r.delivery),
  );
  for (const r of refusals) r.item.jobs = deliveryJobs.has(r.delivery.key) ? [deliveryJobs.get(r.delivery.key)!] : [];

  // 4. The decisions and the link counters: one statement each.
  const decided = live.filter((it) => it.isNew && it.status !== 'stored');
  if (decided.length > 0) {
    await tx.query(sql.unsafe`
      update channel_updates u set status = d.status, message_id = d.message_id, turn_job_id = d.turn_job_id
      from jsonb_to_recordset(${sql.jsonb(decided.map((it) => ({ id: it.updateId, status: it.status, message_id: it.messageId, turn_job_id: it.turnJobId })) as never)})
        as d(id uuid, status text, message_id uuid, turn_job_id uuid)
      where u.id = d.id`);
  }
  const counts = new Map<string, number>();
  for (const it of live) if (it.isNew) counts.set(it.input.linkId, (counts.get(it.input.linkId) ?? 0) + 1);
  if (counts.size > 0) {
    // Locked in id order first: two batches never wait on each other's link rows crosswise.
    const ids = [...counts.keys()].sort();
    await tx.query(sql.unsafe`
      with locked as (select id from channel_links where id = any(${sql.array(ids, 'uuid')}) order by id for no key update)
      update channel_links l set inbound_count = inbound_count + c.n, last_inbound_at = now()
      from unnest(${sql.array(ids, 'uuid')}, ${sql.array(
        ids.map((id) => counts.get(id)!),
        'int4',
      )}) as c(id, n), locked
      where l.id = c.id and locked.id = c.id`);
  }

  // 5. Repeats answer what their first delivery was answered (read after this batch's own decisions).
  const repeats = live.filter((it) => !it.isNew);
  const existing =
    repeats.length === 0
      ? []
      : await tx.any(sql.type(Existing)`
    select link_id, external_id, id, status, turn_job_id from channel_updates
    where (link_id, external_id) in (select * from unnest(${sql.array(
      repeats.map((r) => r.input.linkId),
      'uuid',
    )}, ${sql.array(
      repeats.map((r) => r.input.update.externalId),
      'text',
    )}))`);
  return items.map((it) => {
    if (!links.has(it.input.linkId))
      return { value: new LinkGoneError('No such channel link (disconnected?).'), jobs: [] };
    if (it.isNew)
      return {
        value: { updateId: it.updateId, duplicate: false, status: it.status, jobId: it.turnJobId },
        jobs: it.jobs,
      };
    const e = existing.find((x) => x.link_id === it.input.linkId && x.external_id === it.input.update.externalId)!;
    return { value: { updateId: e.id, duplicate: true, status: e.status, jobId: e.turn_job_id }, jobs: [] };
  });
};
