// Sending a chat turn: the user message, the idempotency record and the
// chat.turn job commit together (the api runs this inside the group
// committer's transaction). The turn runs in the session's own Graphile
// queue, so turns of one session are answered in order.
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { sql, type CommonQueryMethods } from '../db/pool.ts';
import { fingerprint } from '../idempotency.ts';
import type { JobSpec } from '../jobs/enqueue.ts';
import type { BatchHandler } from '../jobs/group-commit.ts';
import { OFFLINE_MODEL, planOf } from '../plans.ts';
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

const BatchRow = z.object({ i: z.number(), session_found: z.boolean(), created: z.boolean() });
const ExistingRecord = z.object({ tenant_id: z.string(), key: z.string(), fingerprint: z.string(), state: z.string(), response_body: z.unknown() });

type Prepared = { input: SendInput; print: string; body: SendAccepted };

/**
 * Many sends in a few statements (the group committer's batch path): the
 * set-based. Sends that share a key within
 * one batch go in later rounds, so the first one wins as in a race.
 */
export const sendBatch: BatchHandler<SendInput, SendOutcome | SessionNotFoundError> = async (tx, inputs) => {
  const prepared: Prepared[] = inputs.map((input) => ({
    input,
    print: fingerprint({ sessionId: input.sessionId, companyScope: input.companyScope ?? null, message: input.message, attachments: input.attachments }),
    body: { jobId: randomUUID(), messageId: randomUUID(), sessionId: input.sessionId, status: 'queued' },
  }));
  const results: Array<{ value: SendOutcome | SessionNotFoundError; jobs: JobSpec[] }> = new Array(inputs.length);
  let pending = prepared.map((_, i) => i);
  while (pending.length > 0) {
    const seen = new Set<string>();
    const round: number[] = [];
    const later: number[] = [];
    for (const i of pending) {
      const k = `${prepared[i]!.input.tenantId}\u0000${prepared[i]!.input.idempotencyKey}`;
      (seen.has(k) ? later : round).push(i);
      seen.add(k);
    }
    await sendRound(tx, prepared, round, results);
    pending = later;
  }
  return results;
};

async function sendRound(
  tx: CommonQueryMethods,
  prepared: readonly Prepared[],
  round: readonly number[],
  results: Array<{ value: SendOutcome | SessionNotFoundError; jobs: JobSpec[] }>,
): Promise<void> {
  const rows = round.map((i) => {
    const { input, print, body } = prepared[i]!;
    return {
      i, tenant_id: input.tenantId, session_id: input.sessionId, key: input.idempotencyKey, fingerprint: print,
      message_id: body.messageId, body, content: input.message, attachments: input.attachments,
      company_scope: input.companyScope ?? null, user_id: input.userId,
    };
  });
  const outcome = await tx.any(sql.type(BatchRow)`
    with input as (
      select * from jsonb_to_recordset(${sql.jsonb(rows as never)}) as r(i int, tenant_id uuid, session_id uuid, key text,
        fingerprint text, message_id uuid, body jsonb, content text, attachments jsonb, company_scope text, user_id uuid)
    ), valid as (
      select input.* from input join chat_sessions s on s.id = input.session_id and s.tenant_id = input.tenant_id
    ), claim as (
      insert into idempotency_records (scope, tenant_id, key, fingerprint, state, response_status, response_body)
      select ${CHAT_SEND_SCOPE}, tenant_id, key, fingerprint, 'completed', 202, body from valid
      on conflict (scope, tenant_id, key) do update
        set fingerprint = excluded.fingerprint, state = excluded.state, response_status = excluded.response_status,
            response_body = excluded.response_body, created_at = now(), expires_at = now() + interval '24 hours'
        where idempotency_records.expires_at <= now()
      returning tenant_id, key
    ), message as (
      insert into chat_messages (id, tenant_id, session_id, role, content, attachments, company_scope, created_by)
      select v.message_id, v.tenant_id, v.session_id, 'user', v.content, v.attachments, v.company_scope, v.user_id
      from valid v join claim c on c.tenant_id = v.tenant_id and c.key = v.key
      returning id
    )
    select input.i, exists (select 1 from valid where valid.i = input.i) as session_found,
      exists (select 1 from message where message.id = input.message_id) as created
    from input`);
  const taken: number[] = [];
  for (const row of outcome) {
    const { input, body } = prepared[row.i]!;
    if (!row.session_found) results[row.i] = { value: new SessionNotFoundError('No such session in this tenant.'), jobs: [] };
    else if (row.created) results[row.i] = { value: { kind: 'accepted', body, job: turnJob(input, body) }, jobs: [turnJob(input, body)] };
    else taken.push(row.i);
  }
  if (taken.length === 0) return;
  // Keys already taken: read their records in a new statement (a racing first
  // request may have committed after the statement above took its snapshot).
  const existing = await tx.any(sql.type(ExistingRecord)`
    select tenant_id, key, fingerprint, state, response_body from idempotency_records
    where scope = ${CHAT_SEND_SCOPE} and (tenant_id, key) in (
      select * from unnest(${sql.array(taken.map((i) => prepared[i]!.input.tenantId), 'uuid')}, ${sql.array(taken.map((i) => prepared[i]!.input.idempotencyKey), 'text')}))`);
  for (const i of taken) {
    const { input, print } = prepared[i]!;
    const record = existing.find((r) => r.tenant_id === input.tenantId && r.key === input.idempotencyKey);
    const value: SendOutcome =
      !record || record.fingerprint !== print
        ? { kind: 'conflict' }
        : record.state !== 'completed'
          ? { kind: 'in_progress' }
          : { kind: 'replayed', body: record.response_body as SendAccepted };
    results[i] = { value, jobs: [] };
  }
}

function turnJob(input: SendInput, body: SendAccepted): JobSpec {
  return {
    id: body.jobId,
    kind: CHAT_TURN_KIND,
    tenantId: input.tenantId,
    queueName: turnQueue(input.sessionId),
    input: { sessionId: input.sessionId, userMessageId: body.messageId },
    maxAttempts: 8,
  };
}

export type QuotaRefusal = { code: 'MESSAGE_LIMIT_REACHED' | 'CREDITS_DEPLETED'; message: string };

/**
 * Refuses a send before anything is queued: the plan's monthly message limit,
 * or no credits left for a model the tenant has no own key for.
 */
export async function checkSendQuota(db: CommonQueryMethods, tenantId: string, sessionId: string): Promise<QuotaRefusal | null> {
  // One read: this UTC month's user messages (the same count billing status
  // shows, kept by a trigger), the session's model, own keys and credits.
  const row = await db.maybeOne(sql.type(z.object({
    plan: z.string(), used: z.number(), model: z.string().nullable(), balance: z.number().nullable(), own_providers: z.array(z.string()),
  }))`
    select t.plan,
      coalesce((select messages from tenant_message_counts c
        where c.tenant_id = t.id and c.month = date_trunc('month', now() at time zone 'UTC')::date), 0) as used,
      (select coalesce(s.model, a.model) from chat_sessions s left join agents a on a.id = s.agent_id
        where s.id = ${sessionId} and s.tenant_id = t.id) as model,
      (select balance_micros from tenant_credits c where c.tenant_id = t.id) as balance,
      array(select provider from provider_keys k where k.tenant_id = t.id) as own_providers
    from tenants t where t.id = ${tenantId}`);
  if (!row) return null;
  const limit = planOf(row.plan).monthlyMessages;
  if (row.used >= limit) {
    return { code: 'MESSAGE_LIMIT_REACHED', message: `The ${row.plan} plan includes ${limit} messages a month; upgrade or wait for the next month.` };
  }
  const provider = parseModel(row.model ?? OFFLINE_MODEL)?.provider;
  if (!provider || provider === 'builtin' || provider === 'ollama') return null; // unknown models fail in the turn, with a code
  if (!row.own_providers.includes(provider) && (row.balance ?? 0) <= 0) {
    return { code: 'CREDITS_DEPLETED', message: 'The tenant has no platform credits left for this model; add credits or your own provider key.' };
  }
  return null;
}
