// Sending a chat turn: the user message, the idempotency record and the
// chat.turn job commit together (the api runs this inside the group
// committer's transaction). The turn runs in the session's own Graphile
// queue, so turns of one session are answered in order.
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { sql, type CommonQueryMethods } from '../db/pool.ts';
import { fingerprint } from '../idempotency.ts';
import { jobRecords, type JobSpec } from '../jobs/enqueue.ts';
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

export type QuotaRefusal = { code: 'MESSAGE_LIMIT_REACHED' | 'CREDITS_DEPLETED'; message: string };

export type SendOutcome =
  | { kind: 'accepted'; body: SendAccepted; job: JobSpec }
  | { kind: 'replayed'; body: SendAccepted }
  | { kind: 'refused'; refusal: QuotaRefusal }
  | { kind: 'conflict' }
  | { kind: 'in_progress' };

/** Thrown (so the savepoint rolls back and no key is spent) when the session is not the tenant's. */
export class SessionNotFoundError extends Error {
  override name = 'SessionNotFoundError';
}

export const turnQueue = (sessionId: string) => `chat:${sessionId}`;

const BatchRow = z.object({ i: z.number(), session_found: z.boolean(), created: z.boolean() });
const ExistingRecord = z.object({ tenant_id: z.string(), key: z.string(), fingerprint: z.string(), state: z.string(), response_body: z.unknown() });

type Prepared = { input: SendInput; print: string; body: SendAccepted; refusal: QuotaRefusal | null };

/**
 * Many sends in a few statements (the group committer's batch path): one
 * statement for the quota of every send (it locks the tenants' counters), one
 * for the idempotency records, the messages and their turn jobs. Sends that share a key
 * within one batch go in later rounds, so the first one wins as in a race.
 */
export const sendBatch: BatchHandler<SendInput, SendOutcome | SessionNotFoundError> = async (tx, inputs) => {
  const prepared: Prepared[] = inputs.map((input) => ({
    input,
    print: fingerprint({ sessionId: input.sessionId, companyScope: input.companyScope ?? null, message: input.message, attachments: input.attachments }),
    body: { jobId: randomUUID(), messageId: randomUUID(), sessionId: input.sessionId, status: 'queued' },
    refusal: null,
  }));
  await decideQuota(tx, prepared);
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
  // The turn job of every send, written by the same statement for the sends
  // whose message it creates: one statement fewer while the tenant's counter
  // row is locked (decideQuota), and none for a replay or a conflict. The
  // `queued` insert runs whether read or not (a data-modifying CTE), and
  // reading `added` runs add_jobs().
  const turns = jobRecords(round.map((i) => turnJob(prepared[i]!.input, prepared[i]!.body)));
  const rows = round.map((i) => {
    const { input, print, body } = prepared[i]!;
    return {
      i, tenant_id: input.tenantId, session_id: input.sessionId, key: input.idempotencyKey, fingerprint: print,
      message_id: body.messageId, body, content: input.message, attachments: input.attachments,
      company_scope: input.companyScope ?? null, user_id: input.userId, allowed: prepared[i]!.refusal === null,
    };
  });
  const outcome = await tx.any(sql.type(BatchRow)`
    with input as (
      select * from jsonb_to_recordset(${sql.jsonb(rows as never)}) as r(i int, tenant_id uuid, session_id uuid, key text,
        fingerprint text, message_id uuid, body jsonb, content text, attachments jsonb, company_scope text, user_id uuid, allowed boolean)
    ), valid as (
      select input.* from input join chat_sessions s on s.id = input.session_id and s.tenant_id = input.tenant_id
    ), claim as (
      insert into idempotency_records (scope, tenant_id, key, fingerprint, state, response_status, response_body)
      select ${CHAT_SEND_SCOPE}, tenant_id, key, fingerprint, 'completed', 202, body from valid where allowed
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
    ), created as (
      select (t->'payload'->>'jobId')::uuid as job_id, t as spec
      from json_array_elements(${sql.json(turns.workerSpecs as never)}) t
      where (t->'payload'->'input'->>'userMessageId')::uuid in (select id from message)
    ), added as (
      select id, (payload->>'jobId')::uuid as job_id
      from graphile_worker.add_jobs(array(select json_populate_record(null::graphile_worker.job_spec, spec) from created))
    ), queued as (
      insert into jobs (id, tenant_id, kind, queue_name, max_attempts, session_id, graphile_job_id)
      select r.id, r.tenant_id, r.kind, r.queue_name, r.max_attempts, r.session_id, added.id
      from jsonb_to_recordset(${sql.jsonb(turns.rows as never)})
        as r(id uuid, tenant_id uuid, kind text, queue_name text, max_attempts integer, session_id uuid)
      join added on added.job_id = r.id
      returning 1
    )
    select input.i, exists (select 1 from valid where valid.i = input.i) as session_found,
      exists (select 1 from message where message.id = input.message_id) as created
    from input`);
  const taken: number[] = [];
  for (const row of outcome) {
    const { input, body } = prepared[row.i]!;
    if (!row.session_found) results[row.i] = { value: new SessionNotFoundError('No such session in this tenant.'), jobs: [] };
    // Its turn job is written already (above), in this transaction.
    else if (row.created) results[row.i] = { value: { kind: 'accepted', body, job: turnJob(input, body) }, jobs: [] };
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
    const { input, print, refusal } = prepared[i]!;
    const record = existing.find((r) => r.tenant_id === input.tenantId && r.key === input.idempotencyKey);
    // Over quota, a new send is refused (nothing written, the key not spent); its replay still answers.
    const value: SendOutcome =
      !record && refusal
        ? { kind: 'refused', refusal }
        : !record || record.fingerprint !== print
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
    sessionId: input.sessionId,
    maxAttempts: 8,
  };
}

const QuotaRow = z.object({
  i: z.number(), plan: z.string(), used: z.number(), model: z.string().nullable(), balance: z.number().nullable(),
  own_providers: z.array(z.string()), has_record: z.boolean(),
});

/**
 * Refuses sends before anything is written: the plan's monthly message limit
 * (this UTC month's user messages, the count billing status shows, kept by a
 * trigger), or no credits left for a model the tenant has no own key for.
 * One read for the whole batch; the batch's own new messages count against
 * the limit in order. A send whose key already has a record (or repeats a key
 * earlier in the batch) is a replay and spends nothing.
 */
async function decideQuota(tx: CommonQueryMethods, prepared: Prepared[]): Promise<void> {
  // The tenants' counter rows of this month, created if missing and locked in
  // a fixed order: a concurrent batch of the same tenant waits here for this
  // one's commit and then reads the new count, so the limit holds exactly.
  // (The trigger that bumps the count would lock the row later anyway.)
  const tenants = [...new Set(prepared.map((p) => p.input.tenantId))].sort();
  // One statement: the upsert creates a missing row and, by its no-op
  // update, locks every row in sorted order and returns the count it holds.
  const rows = await tx.any(sql.type(QuotaRow)`
    with locked as (
      insert into tenant_message_counts (tenant_id, month, messages)
      select t, date_trunc('month', now() at time zone 'UTC')::date, 0 from unnest(${sql.array(tenants, 'uuid')}) t order by t
      on conflict (tenant_id, month) do update set messages = tenant_message_counts.messages
      returning tenant_id, messages
    ), input as (
      select * from unnest(${sql.array(prepared.map((_, i) => i), 'int4')}, ${sql.array(prepared.map((p) => p.input.tenantId), 'uuid')},
        ${sql.array(prepared.map((p) => p.input.sessionId), 'uuid')}, ${sql.array(prepared.map((p) => p.input.idempotencyKey), 'text')}) as x(i, tenant_id, session_id, key)
    )
    select input.i, t.plan,
      coalesce((select messages from locked where locked.tenant_id = t.id), 0) as used,
      (select coalesce(s.model, a.model) from chat_sessions s left join agents a on a.id = s.agent_id
        where s.id = input.session_id and s.tenant_id = t.id) as model,
      (select balance_micros from tenant_credits c where c.tenant_id = t.id) as balance,
      array(select provider from provider_keys k where k.tenant_id = t.id) as own_providers,
      exists (select 1 from idempotency_records r
        where r.scope = ${CHAT_SEND_SCOPE} and r.tenant_id = t.id and r.key = input.key and r.expires_at > now()) as has_record
    from input join tenants t on t.id = input.tenant_id`);
  const byIndex = new Map(rows.map((r) => [r.i, r]));
  const newInBatch = new Map<string, number>();
  const keysInBatch = new Set<string>();
  prepared.forEach((p, i) => {
    const row = byIndex.get(i);
    const key = `${p.input.tenantId}\u0000${p.input.idempotencyKey}`;
    const replay = !row || row.has_record || keysInBatch.has(key);
    keysInBatch.add(key);
    if (replay) return; // no tenant: the session check answers 404
    const earlier = newInBatch.get(p.input.tenantId) ?? 0;
    p.refusal = refusalOf(row, row.used + earlier);
    if (!p.refusal) newInBatch.set(p.input.tenantId, earlier + 1);
  });
}

function refusalOf(row: z.infer<typeof QuotaRow>, used: number): QuotaRefusal | null {
  const limit = planOf(row.plan).monthlyMessages;
  if (used >= limit) {
    return { code: 'MESSAGE_LIMIT_REACHED', message: `The ${row.plan} plan includes ${limit} messages a month; upgrade or wait for the next month.` };
  }
  const provider = parseModel(row.model ?? OFFLINE_MODEL)?.provider;
  if (!provider || provider === 'builtin' || provider === 'ollama') return null; // unknown models fail in the turn, with a code
  if (!row.own_providers.includes(provider) && (row.balance ?? 0) <= 0) {
    return { code: 'CREDITS_DEPLETED', message: 'The tenant has no platform credits left for this model; add credits or your own provider key.' };
  }
  return null;
}
