// Sending a chat turn: the quota decision, the idempotency record, the user
// message and the chat.turn job commit together, in one statement for a whole
// batch of sends (the group committer's statement path). The turn runs in the
// session's own Graphile queue, so turns of one session are answered in order.
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { sql } from '../db/pool.ts';
import { fingerprint } from '../idempotency.ts';
import { enqueueCtes, prepareJobs, type JobSpec } from '../jobs/enqueue.ts';
import type { StatementHandler } from '../jobs/group-commit.ts';
import { OFFLINE_MODEL, PLANS, planOf } from '../plans.ts';
import { PROVIDER_IDS } from '../providers/types.ts';

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

/** The session is not the tenant's (nothing is written and no key is spent). */
export class SessionNotFoundError extends Error {
  override name = 'SessionNotFoundError';
}

export const turnQueue = (sessionId: string) => `chat:${sessionId}`;

const ExistingRecord = z.object({ tenant_id: z.string(), key: z.string(), fingerprint: z.string(), state: z.string(), response_body: z.unknown() });
const SendRow = z.object({ i: z.number(), session_found: z.boolean(), created: z.boolean(), refusal: z.enum(['MESSAGE_LIMIT_REACHED', 'CREDITS_DEPLETED']).nullable(), plan: z.string() });

// What the statement needs from core/plans.ts and the provider registry.
const MONTHLY_LIMITS = Object.fromEntries(Object.values(PLANS).map((p) => [p.name, p.monthlyMessages]));
/** Providers whose models are paid from credits when the tenant has no own key. */
const PAID_PROVIDERS = PROVIDER_IDS.filter((p) => p !== 'builtin' && p !== 'ollama');

type Prepared = { input: SendInput; print: string; body: SendAccepted; job: JobSpec };

/**
 * A batch of sends as one statement, outside any transaction block (the
 * group committer's statement path): it locks the tenants' counter rows of
 * this month, decides the quota of every send in order (replays and repeated
 * keys spend nothing), claims the idempotency keys, writes the user messages
 * and enqueues their turns. Everything it writes commits together, in one
 * round trip. Replays and conflicts are then read from the records.
 */
export const sendStatement: StatementHandler<SendInput, SendOutcome | SessionNotFoundError> = async (db, inputs) => {
  const prepared: Prepared[] = inputs.map((input) => {
    const body: SendAccepted = { jobId: randomUUID(), messageId: randomUUID(), sessionId: input.sessionId, status: 'queued' };
    return {
      input,
      print: fingerprint({ sessionId: input.sessionId, companyScope: input.companyScope ?? null, message: input.message, attachments: input.attachments }),
      body,
      job: turnJob(input, body),
    };
  });
  const rows = prepared.map(({ input, print, body }, i) => ({
    i, tenant_id: input.tenantId, session_id: input.sessionId, key: input.idempotencyKey, fingerprint: print,
    message_id: body.messageId, job_id: body.jobId, body, content: input.message, attachments: input.attachments,
    company_scope: input.companyScope ?? null, user_id: input.userId,
  }));
  const jobs = prepareJobs(prepared.map((p) => p.job));
  const month = sql.fragment`date_trunc('month', now() at time zone 'UTC')::date`;
  const outcome = await db.any(sql.type(SendRow)`
    with input as (
      select * from jsonb_to_recordset(${sql.jsonb(rows as never)}) as r(i int, tenant_id uuid, session_id uuid, key text,
        fingerprint text, message_id uuid, job_id uuid, body jsonb, content text, attachments jsonb, company_scope text, user_id uuid)
    ), locked as (
      -- Concurrent batches of a tenant wait here and then read the new count,
      -- so the plan's limit holds exactly (a month's first batch finds no row
      -- to lock, but starts from zero).
      select tenant_id, messages from tenant_message_counts
      where tenant_id in (select tenant_id from input) and month = ${month}
      order by tenant_id for update
    ), facts as (
      select input.*, t.plan, coalesce(l.messages, 0) as used, s.id is not null as session_found,
        coalesce(s.model, a.model, ${OFFLINE_MODEL}) as model,
        coalesce(c.balance_micros, 0) as balance,
        exists (select 1 from idempotency_records r where r.scope = ${CHAT_SEND_SCOPE} and r.tenant_id = input.tenant_id
          and r.key = input.key and r.expires_at > now()) as has_record,
        row_number() over (partition by input.tenant_id, input.key order by input.i) > 1 as repeated_key
      from input join tenants t on t.id = input.tenant_id
      left join locked l on l.tenant_id = input.tenant_id
      left join chat_sessions s on s.id = input.session_id and s.tenant_id = input.tenant_id
      left join agents a on a.id = s.agent_id
      left join tenant_credits c on c.tenant_id = input.tenant_id
    ), paid as (
      -- A well-formed provider/model of a paid provider, without the tenant's own key and credits.
      select facts.*, session_found and not has_record and not repeated_key as fresh,
        model ~ '^[^/]+/.+' and split_part(model, '/', 1) = any(${sql.array(PAID_PROVIDERS, 'text')})
          and not exists (select 1 from provider_keys k where k.tenant_id = facts.tenant_id and k.provider = split_part(model, '/', 1))
          and balance <= 0 as no_credits
      from facts
    ), decided as (
      select paid.*,
        case when not fresh then null
          when used + count(*) filter (where fresh and not no_credits) over (partition by tenant_id order by i)
            > coalesce((${sql.jsonb(MONTHLY_LIMITS)}->>plan)::int, ${planOf('').monthlyMessages}) then 'MESSAGE_LIMIT_REACHED'
          when no_credits then 'CREDITS_DEPLETED'
        end as refusal
      from paid
    ), claim as (
      insert into idempotency_records (scope, tenant_id, key, fingerprint, state, response_status, response_body)
      select ${CHAT_SEND_SCOPE}, tenant_id, key, fingerprint, 'completed', 202, body from decided
      where session_found and refusal is null and not repeated_key
      on conflict (scope, tenant_id, key) do update
        set fingerprint = excluded.fingerprint, state = excluded.state, response_status = excluded.response_status,
            response_body = excluded.response_body, created_at = now(), expires_at = now() + interval '24 hours'
        where idempotency_records.expires_at <= now()
      returning tenant_id, key
    ), message as (
      insert into chat_messages (id, tenant_id, session_id, role, content, attachments, company_scope, created_by)
      select d.message_id, d.tenant_id, d.session_id, 'user', d.content, d.attachments, d.company_scope, d.user_id
      from decided d join claim c on c.tenant_id = d.tenant_id and c.key = d.key
      where not d.repeated_key
      returning id
    ), ${enqueueCtes(jobs, sql.fragment`select d.job_id from decided d join message m on m.id = d.message_id`)}
    select d.i, d.session_found, exists (select 1 from message m where m.id = d.message_id) as created, d.refusal, d.plan
    from decided d
    where (select count(*) from jobs_inserted) >= 0 and (select count(*) from jobs_added) >= 0`);

  const results: Array<SendOutcome | SessionNotFoundError> = new Array(inputs.length);
  const taken: number[] = [];
  for (const row of outcome) {
    const { body, job } = prepared[row.i]!;
    if (!row.session_found) results[row.i] = new SessionNotFoundError('No such session in this tenant.');
    else if (row.created) results[row.i] = { kind: 'accepted', body, job };
    else if (row.refusal) results[row.i] = { kind: 'refused', refusal: refusalMessage(row.refusal, row.plan) };
    else taken.push(row.i);
  }
  for (let i = 0; i < inputs.length; i++) if (!results[i] && !taken.includes(i)) results[i] = new SessionNotFoundError('No such tenant.');
  if (taken.length > 0) {
    // Keys already taken (before, or by an earlier send of this batch): read their records.
    const existing = await db.any(sql.type(ExistingRecord)`
      select tenant_id, key, fingerprint, state, response_body from idempotency_records
      where scope = ${CHAT_SEND_SCOPE} and (tenant_id, key) in (
        select * from unnest(${sql.array(taken.map((i) => prepared[i]!.input.tenantId), 'uuid')}, ${sql.array(taken.map((i) => prepared[i]!.input.idempotencyKey), 'text')}))`);
    for (const i of taken) {
      const { input, print } = prepared[i]!;
      const record = existing.find((r) => r.tenant_id === input.tenantId && r.key === input.idempotencyKey);
      // A repeat of a key whose first send in this batch was refused is refused alike.
      const first = prepared.findIndex((p) => p.input.tenantId === input.tenantId && p.input.idempotencyKey === input.idempotencyKey);
      const firstOutcome = results[first];
      results[i] =
        !record && first !== i && firstOutcome && !(firstOutcome instanceof SessionNotFoundError) && firstOutcome.kind === 'refused'
          ? firstOutcome
          : !record || record.fingerprint !== print
          ? { kind: 'conflict' }
          : record.state !== 'completed'
            ? { kind: 'in_progress' }
            : { kind: 'replayed', body: record.response_body as SendAccepted };
    }
  }
  return results;
};

function refusalMessage(code: QuotaRefusal['code'], planName: string): QuotaRefusal {
  if (code === 'CREDITS_DEPLETED') {
    return { code, message: 'The tenant has no platform credits left for this model; add credits or your own provider key.' };
  }
  const plan = planOf(planName);
  return { code, message: `The ${plan.name} plan includes ${plan.monthlyMessages} messages a month; upgrade or wait for the next month.` };
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
