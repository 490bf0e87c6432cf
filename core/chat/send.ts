// Sending a chat turn: the user message, the idempotency record and the
// chat.turn job commit together (the api runs this inside the group
// committer's transaction). The turn runs in the session's own Graphile
// queue, so turns of one session are answered in order.
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { sql, type CommonQueryMethods } from '../db/pool.ts';
import { fingerprint } from '../idempotency.ts';
import type { JobSpec } from '../jobs/enqueue.ts';
import { messageQuota } from '../billing/status.ts';
import { OFFLINE_MODEL } from '../plans.ts';
import { parseModel } from '../providers/registry.ts';

export const CHAT_SEND_SCOPE = 'chat.send';
export const CHAT_TURN_KIND = 'chat.turn';

export const Attachment = z.object({
  name: z.string().min(1).max(200),
  mediaType: z.string().min(3).max(100).regex(/^[\w.+-]+\/[\w.+-]+$/, 'a media type such as text/plain'),
  url: z.url().max(2048).optional(),
  text: z.string().max(100_000).optional().describe('Inline content for text attachments'),
});
export type Attachment = z.infer<typeof Attachment>;

export type SendInput = {
  tenantId: string;
  userId: string;
  idempotencyKey: string;
  sessionId: string;
  message: string;
  companyScope?: string | undefined;
  attachments: Attachment[];
};

export type SendAccepted = { jobId: string; messageId: string; sessionId: string; status: 'queued' };

export type SendOutcome =
  | { kind: 'accepted'; body: SendAccepted; job: JobSpec }
  | { kind: 'replayed'; body: SendAccepted }
  | { kind: 'conflict' }
  | { kind: 'in_progress' };

/** Thrown (so the savepoint rolls back and no key is spent) when the session is not the tenant's. */
export class SessionNotFoundError extends Error {
  override name = 'SessionNotFoundError';
}

export const turnQueue = (sessionId: string) => `chat:${sessionId}`;

/**
 * One statement: checks the session, claims the key (recording the 202 it
 * will answer, since ids are made here), and stores the user message only if
 * the claim was new. Being one statement it is atomic without a savepoint,
 * which lets the group committer batch many sends cheaply.
 */
export async function sendInTransaction(tx: CommonQueryMethods, input: SendInput): Promise<SendOutcome> {
  const jobId = randomUUID();
  const messageId = randomUUID();
  const body: SendAccepted = { jobId, messageId, sessionId: input.sessionId, status: 'queued' };
  const print = fingerprint({
    sessionId: input.sessionId,
    companyScope: input.companyScope ?? null,
    message: input.message,
    attachments: input.attachments,
  });
  const row = await tx.one(sql.type(z.object({ session_found: z.boolean(), created: z.boolean() }))`
    with session as (
      select id from chat_sessions where id = ${input.sessionId} and tenant_id = ${input.tenantId}
    ), claim as (
      insert into idempotency_records (scope, tenant_id, key, fingerprint, state, response_status, response_body)
      select ${CHAT_SEND_SCOPE}, ${input.tenantId}, ${input.idempotencyKey}, ${print}, 'completed', 202, ${sql.jsonb(body)}
      from session
      on conflict (scope, tenant_id, key) do update
        set fingerprint = excluded.fingerprint, state = excluded.state, response_status = excluded.response_status,
            response_body = excluded.response_body, created_at = now(), expires_at = now() + interval '24 hours'
        where idempotency_records.expires_at <= now()
      returning 1
    ), message as (
      insert into chat_messages (id, tenant_id, session_id, role, content, attachments, company_scope, created_by)
      select ${messageId}, ${input.tenantId}, ${input.sessionId}, 'user', ${input.message},
        ${sql.jsonb(input.attachments as never)}, ${input.companyScope ?? null}, ${input.userId}
      from claim
      returning 1
    )
    select exists (select 1 from session) as session_found, exists (select 1 from message) as created`);
  if (!row.session_found) throw new SessionNotFoundError('No such session in this tenant.');
  if (!row.created) {
    // The key was taken: read its record in a new statement (a racing first
    // request may have committed after this statement's snapshot).
    const existing = await tx.maybeOne(sql.type(z.object({ fingerprint: z.string(), state: z.string(), response_body: z.unknown() }))`
      select fingerprint, state, response_body from idempotency_records
      where scope = ${CHAT_SEND_SCOPE} and tenant_id = ${input.tenantId} and key = ${input.idempotencyKey}`);
    if (!existing || existing.fingerprint !== print) return { kind: 'conflict' };
    if (existing.state !== 'completed') return { kind: 'in_progress' };
    return { kind: 'replayed', body: existing.response_body as SendAccepted };
  }
  return {
    kind: 'accepted',
    body,
    job: {
      id: jobId,
      kind: CHAT_TURN_KIND,
      tenantId: input.tenantId,
      queueName: turnQueue(input.sessionId),
      input: { sessionId: input.sessionId, userMessageId: messageId },
      maxAttempts: 8,
    },
  };
}

export type QuotaRefusal = { code: 'MESSAGE_LIMIT_REACHED' | 'CREDITS_DEPLETED'; message: string };

/**
 * Refuses a send before anything is queued: the plan's monthly message limit,
 * or no credits left for a model the tenant has no own key for.
 */
export async function checkSendQuota(db: CommonQueryMethods, tenantId: string, sessionId: string): Promise<QuotaRefusal | null> {
  // The same count billing status shows (UTC month), so both always agree.
  const quota = await messageQuota(db, tenantId);
  if (!quota.allowed) {
    return { code: 'MESSAGE_LIMIT_REACHED', message: `The plan includes ${quota.limit} messages a month; upgrade or wait for the next month.` };
  }
  const row = await db.maybeOne(sql.type(z.object({ model: z.string().nullable(), balance: z.number().nullable() }))`
    select coalesce(s.model, a.model) as model,
      (select balance_micros::float8 from tenant_credits c where c.tenant_id = ${tenantId}) as balance
    from chat_sessions s left join agents a on a.id = s.agent_id
    where s.id = ${sessionId} and s.tenant_id = ${tenantId}`);
  if (!row) return null; // the send itself answers 404
  const provider = parseModel(row.model ?? OFFLINE_MODEL)?.provider;
  if (!provider || provider === 'builtin' || provider === 'ollama') return null; // unknown models fail in the turn, with a code
  const ownKey = await db.exists(sql.unsafe`select 1 from provider_keys where tenant_id = ${tenantId} and provider = ${provider}`);
  if (!ownKey && (row.balance ?? 0) <= 0) {
    return { code: 'CREDITS_DEPLETED', message: 'The tenant has no platform credits left for this model; add credits or your own provider key.' };
  }
  return null;
}
