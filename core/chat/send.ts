// Sending a chat turn: the user message (which carries the send's
// Idempotency-Key) and the chat.turn job commit together, in one statement
// per batch of sends (the api's group committer gathers the batch;
// chat_send_round, migration 0043, writes it).
// The turn runs in the session's own serial queue, so turns of one session
// are answered in order.
import { timeOrderedId } from '../ids.ts';
import { z } from 'zod';
import { sqlState } from '../db/errors.ts';
import { sql, type CommonQueryMethods } from '../db/pool.ts';
import { fingerprint } from '../idempotency.ts';
import { jobRecord, type JobSpec } from '../jobs/enqueue.ts';
import type { BatchHandler } from '../jobs/group-commit.ts';
import { OFFLINE_MODEL, PLANS } from '../plans.ts';
import { PROVIDER_IDS } from '../providers/types.ts';

export const CHAT_TURN_KIND = 'chat.turn';

export const Attachment = z.object({
  name: z.string().min(1).max(200),
  mediaType: z
    .string()
    .min(3)
    .max(100)
    .regex(/^[\w.+-]+\/[\w.+-]+$/, 'a media type such as text/plain'),
  url: z.url().max(2048).optional(),
  text: z.string().max(100_000).optional().describe('Inline content for text attachments'),
});
export type Attachment = z.infer<typeof Attachment>;

export type SendInput = {
  tenantId: string;
  userId: string;
  /** Unique per tenant: a person's key is scoped to them (personalKey), a channel's to its update. */
  idempotencyKey: string;
  sessionId: string;
  message: string;
  companyScope?: string | undefined;
  attachments: Attachment[];
};

/**
 * A person's Idempotency-Key, as stored: scoped to them, so two members of a
 * workspace who pick the same key never see each other's sends.
 */
export const personalKey = (userId: string, key: string) => `person:${userId}:${key}`;

export type SendAccepted = { jobId: string; messageId: string; sessionId: string; status: 'queued' };

export type QuotaRefusal = {
  code: 'MESSAGE_LIMIT_REACHED' | 'CREDITS_DEPLETED' | 'QUEUE_LIMIT_REACHED' | 'PROVIDER_KEY_MISSING';
  message: string;
};

/** The HTTP status of a refusal: payment for the plan's limits, 429 for the account's work in flight. */
export const refusalStatus = (refusal: QuotaRefusal): 402 | 429 => (refusal.code === 'QUEUE_LIMIT_REACHED' ? 429 : 402);

export type SendOutcome =
  | { kind: 'accepted'; body: SendAccepted; job: JobSpec }
  | { kind: 'replayed'; body: SendAccepted }
  | { kind: 'refused'; refusal: QuotaRefusal }
  | { kind: 'conflict' };

/** A send's answer (nothing written, no key spent) when the session is not the tenant's. */
export class SessionNotFoundError extends Error {
  override name = 'SessionNotFoundError';
}

export const turnQueue = (sessionId: string) => `chat:${sessionId}`;

const BatchRow = z.object({
  i: z.number(),
  session_found: z.boolean(),
  created: z.boolean(),
  refusal: z
    .enum(['MESSAGE_LIMIT_REACHED', 'CREDITS_DEPLETED', 'QUEUE_LIMIT_REACHED', 'PROVIDER_KEY_MISSING'])
    .nullable(),
  plan: z.string().nullable(),
  message_limit: z.number().nullable(),
  record_message_id: z.string().nullable(),
  record_job_id: z.string().nullable(),
  record_fingerprint: z.string().nullable(),
});
/** A send already made with a key: its message carries the key (0033). */
const KeyedMessage = z.object({
  tenant_id: z.string(),
  key: z.string(),
  fingerprint: z.string().nullable(),
  message_id: z.string(),
  job_id: z.string().nullable(),
});
type KeyRecord = { fingerprint: string | null; messageId: string; jobId: string | null };

type Prepared = { input: SendInput; print: string; body: SendAccepted };

// What the quota needs to know in SQL: each plan's monthly messages (an
// unknown plan counts as free, as planOf does), and the providers whose
// models spend platform credits when the tenant has no key of its own.
const MESSAGE_LIMITS = Object.fromEntries(Object.values(PLANS).map((p) => [p.name, p.monthlyMessages]));
const CREDIT_PROVIDERS = PROVIDER_IDS.filter((p) => p !== 'builtin' && p !== 'ollama');

/**
 * Many sends, one statement each round: the quota of every send, the
 * messages (with their keys) and their turn jobs. A statement is
 * atomic by itself, so the group committer runs this without a transaction
 * block (no BEGIN and COMMIT round trips); a caller inside one (a channel's
 * inbound batch) passes inTransaction. Sends that share a key within one
 * batch go in later rounds, so the first one wins as in a race.
 */
export const sendBatch: BatchHandler<SendInput, SendOutcome | SessionNotFoundError> = async (
  db,
  inputs,
  inTransaction,
) => {
  const prepared: Prepared[] = inputs.map((input) => ({
    input,
    print: fingerprint({
      sessionId: input.sessionId,
      companyScope: input.companyScope ?? null,
      message: input.message,
      attachments: input.attachments,
    }),
    body: { jobId: timeOrderedId(), messageId: timeOrderedId(), sessionId: input.sessionId, status: 'queued' },
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
    await sendRound(db, prepared, round, results, inTransaction);
    pending = later;
  }
  return results;
};
sendBatch.needsNoTransaction = true; // each round is one statement (see group-commit.ts)

async function sendRound(
  db: CommonQueryMethods,
  prepared: readonly Prepared[],
  round: readonly number[],
  results: Array<{ value: SendOutcome | SessionNotFoundError; jobs: JobSpec[] }>,
  inTransaction: boolean,
): Promise<void> {
  const specs = new Map(round.map((i) => [i, turnJob(prepared[i]!.input, prepared[i]!.body)]));
  // Everything of one send in one element: the statement parses one array.
  const sends = JSON.stringify(
    round.map((i) => {
      const { input, print, body } = prepared[i]!;
      const job = jobRecord(specs.get(i)!);
      return {
        i,
        tenant_id: input.tenantId,
        session_id: input.sessionId,
        key: input.idempotencyKey,
        fingerprint: print,
        message_id: body.messageId,
        content: input.message,
        attachments: input.attachments,
        company_scope: input.companyScope ?? null,
        user_id: input.userId,
        job_id: job.id,
        kind: job.kind,
        queue: job.queue,
        pool: job.pool,
        max_attempts: job.max_attempts,
        input: job.input,
      };
    }),
  );
  // One call of chat_send_round (migration 0043): the quota of every send,
  // then the message (carrying its key) and the turn job of each it accepts,
  // at its place in the fair order. A refused send writes nothing and spends
  // no key. It reads the month's message counts without a lock and fails
  // (QT001) if a concurrent send took the room meanwhile; then, and only
  // then, the round runs again with the counter rows locked before they are read.
  const run = (lockFirst: boolean) =>
    db.any(sql.type(BatchRow)`
    select i, session_found, created, refusal, plan, message_limit, record_message_id, record_job_id, record_fingerprint
    from chat_send_round(${sends}::jsonb, ${sql.jsonb(MESSAGE_LIMITS)}, ${PLANS.free.monthlyMessages},
      ${sql.array(CREDIT_PROVIDERS, 'text')}, ${OFFLINE_MODEL}, ${lockFirst})`);
  // Inside a transaction block (a channel's inbound batch) a
  // failed statement would abort the transaction: lock first there.
  let outcome;
  try {
    outcome = await run(inTransaction);
  } catch (error) {
    if (inTransaction || sqlState(error) !== QUOTA_RACE) throw error;
    outcome = await run(true);
  }
  const records = new Map<number, KeyRecord>();
  const unseen: number[] = [];
  const refusals = new Map<number, QuotaRefusal>();
  for (const row of outcome) {
    if (!row.session_found)
      results[row.i] = { value: new SessionNotFoundError('No such session in this tenant.'), jobs: [] };
    // Its turn job is written already (above), in this statement.
    else if (row.created)
      results[row.i] = { value: { kind: 'accepted', body: prepared[row.i]!.body, job: specs.get(row.i)! }, jobs: [] };
    else if (row.record_message_id)
      records.set(row.i, {
        fingerprint: row.record_fingerprint,
        messageId: row.record_message_id,
        jobId: row.record_job_id,
      });
    else {
      if (row.refusal) refusals.set(row.i, refusalOf(row.refusal, row.plan!, row.message_limit!));
      unseen.push(row.i);
    }
  }
  // Refused, or the key taken by a send the statement could not see (another
  // api process committed it after the statement began): read it now.
  if (unseen.length > 0) {
    const found = await db.any(sql.type(KeyedMessage)`
      select tenant_id, idempotency_key as key, request_fingerprint as fingerprint, id as message_id, turn_job_id as job_id
      from chat_messages where idempotency_key is not null and (tenant_id, idempotency_key) in (
        select * from unnest(${sql.array(
          unseen.map((i) => prepared[i]!.input.tenantId),
          'uuid',
        )}, ${sql.array(
          unseen.map((i) => prepared[i]!.input.idempotencyKey),
          'text',
        )}))`);
    for (const i of unseen) {
      const { input } = prepared[i]!;
      const m = found.find((r) => r.tenant_id === input.tenantId && r.key === input.idempotencyKey);
      if (m) records.set(i, { fingerprint: m.fingerprint, messageId: m.message_id, jobId: m.job_id });
    }
  }
  // A send read again above may be in both.
  for (const i of new Set([...records.keys(), ...unseen])) {
    const { input, print } = prepared[i]!;
    const record = records.get(i);
    const refusal = refusals.get(i);
    // Over quota, a new send is refused (nothing written, the key not spent); its replay still answers.
    const value: SendOutcome =
      !record && refusal
        ? { kind: 'refused', refusal }
        : !record || record.fingerprint !== print || !record.jobId
          ? { kind: 'conflict' }
          : {
              kind: 'replayed',
              body: { jobId: record.jobId, messageId: record.messageId, sessionId: input.sessionId, status: 'queued' },
            };
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

/** The trigger's "a concurrent send took the room" (0029). */
const QUOTA_RACE = 'QT001';

function refusalOf(code: QuotaRefusal['code'], plan: string, limit: number): QuotaRefusal {
  if (code === 'MESSAGE_LIMIT_REACHED')
    return {
      code,
      message: `The ${plan} plan includes ${limit} messages a month; upgrade or wait for the next month.`,
    };
  if (code === 'QUEUE_LIMIT_REACHED')
    return {
      code,
      message: `The account has ${limit} unfinished jobs, the most its ${plan} plan allows at a time; send again once some are answered, or upgrade.`,
    };
  if (code === 'PROVIDER_KEY_MISSING')
    return {
      code,
      message:
        "No key can serve this session's model: add your own key for its provider (PUT /api/provider-keys/:provider), or choose another model for the session.",
    };
  return {
    code,
    message: 'The tenant has no platform credits left for this model; add credits or your own provider key.',
  };
}
