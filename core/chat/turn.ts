// One chat turn, run by the chat.turn task: history -> model -> assistant
// message + usage record. Keyed by the job id, so a retry after a crash or a
// broken stream never writes a second message or a second usage record.
import { z } from 'zod';
import type { Config } from '../config.ts';
import type { Keyring } from '../crypto/keyring.ts';
import { sql, type CommonQueryMethods, type DatabasePool } from '../db/pool.ts';
import { PermanentJobError, RetryableJobError } from '../jobs/errors.ts';
import { OFFLINE_MODEL, planOf } from '../plans.ts';
import { credentialsFor, spendCredits } from '../provider-keys/keys.ts';
import { costMicros, parseModel, providerFor } from '../providers/registry.ts';
import { ProviderError, type ChatMessage } from '../providers/types.ts';
import { modelAllowed } from './models.ts';

export const TurnInput = z.object({ sessionId: z.uuid(), userMessageId: z.uuid() });
export type TurnInput = z.infer<typeof TurnInput>;

export type TurnResult = {
  assistantMessageId: string;
  model: string;
  inputTokens: number;
  outputTokens: number;
  costMicros: number;
};

export type TurnContext = {
  db: DatabasePool;
  config: Config;
  keyring: Keyring;
  jobId: string;
  tenantId: string;
  signal: AbortSignal;
  progress: (value: unknown) => Promise<void>;
  /** Records the job's result in the given transaction (with the answer). */
  completeWithin: (tx: CommonQueryMethods, result: unknown) => Promise<boolean>;
};

const HISTORY_LIMIT = 50;
const PROGRESS_EVERY_MS = 50;

const Setup = z.object({ model: z.string().nullable(), plan: z.string(), agent_id: z.string().nullable(), user_seq: z.number().nullable() });
const History = z.object({ role: z.enum(['user', 'assistant', 'system']), content: z.string(), attachments: z.array(z.unknown()) });

async function alreadyAnswered(ctx: TurnContext): Promise<TurnResult | null> {
  return ctx.db.maybeOne(sql.type(z.object({ assistantMessageId: z.string(), model: z.string(), inputTokens: z.number(), outputTokens: z.number(), costMicros: z.number() }))`
    select m.id as "assistantMessageId", coalesce(m.model, u.model, '') as model,
      coalesce(u.input_tokens, 0) as "inputTokens", coalesce(u.output_tokens, 0) as "outputTokens", coalesce(u.cost_micros, 0)::float8 as "costMicros"
    from chat_messages m left join usage_records u on u.job_id = m.job_id
    where m.job_id = ${ctx.jobId}`);
}

function withAttachments(content: string, attachments: unknown[]): string {
  const texts = attachments
    .map((a) => a as { name?: string; text?: string })
    .filter((a) => typeof a.text === 'string')
    .map((a) => `\n\n[attachment ${a.name ?? ''}]\n${a.text}`);
  return content + texts.join('');
}

export async function runChatTurn(input: TurnInput, ctx: TurnContext): Promise<TurnResult> {
  const done = await alreadyAnswered(ctx);
  if (done) return done;

  const setup = await ctx.db.maybeOne(sql.type(Setup)`
    select coalesce(s.model, a.model) as model, t.plan, s.agent_id,
      (select seq from chat_messages where id = ${input.userMessageId} and session_id = s.id) as user_seq
    from chat_sessions s join tenants t on t.id = s.tenant_id left join agents a on a.id = s.agent_id
    where s.id = ${input.sessionId} and s.tenant_id = ${ctx.tenantId}`);
  if (!setup || setup.user_seq === null) throw new PermanentJobError('session_not_found', 'The session or its message no longer exists.');

  const modelId = setup.model ?? OFFLINE_MODEL;
  if (!modelAllowed(planOf(setup.plan), modelId)) {
    throw new PermanentJobError('model_not_allowed', `The ${setup.plan} plan does not include ${modelId}; pick an allowed model.`);
  }
  const parsed = parseModel(modelId);
  if (!parsed) throw new PermanentJobError('model_not_found', `Unknown model ${modelId}.`);
  const { provider, model } = parsed;
  const adapter = providerFor(provider, ctx.config.providers);
  const credentials = await credentialsFor(ctx.db, ctx.keyring, ctx.config, ctx.tenantId, provider);
  if (!credentials) throw new PermanentJobError('provider_key_missing', `No key for ${provider}: add one in provider keys.`);
  // Platform credits pay for metered providers only (never the offline model or a local Ollama).
  const paidByCredits = credentials.source === 'platform_credits' && adapter.needsKey;
  let budget = Number.POSITIVE_INFINITY;
  if (paidByCredits) {
    budget = await ctx.db.oneFirst(sql.type(z.object({ b: z.number() }))`
      select coalesce((select balance_micros::float8 from tenant_credits where tenant_id = ${ctx.tenantId}), 0) as b`);
    if (budget <= 0) throw new PermanentJobError('credits_exhausted', 'No platform credits left; add credits or your own provider key.');
  }

  const rows = await ctx.db.any(sql.type(History)`
    select role, content, attachments from (
      select role, content, attachments, seq from chat_messages
      where session_id = ${input.sessionId} and seq <= ${setup.user_seq} order by seq desc limit ${HISTORY_LIMIT}) h
    order by seq`);
  const messages: ChatMessage[] = rows.map((r) => ({ role: r.role, content: withAttachments(r.content, r.attachments) }));

  // Stream: publish text so far (throttled), and stop a turn that would spend
  // more credits than the tenant has.
  const abort = new AbortController();
  const onParentAbort = () => abort.abort();
  ctx.signal.addEventListener('abort', onParentAbort, { once: true });
  const inputEstimate = Math.ceil(messages.reduce((n, m) => n + m.content.length, 0) / 4);
  let text = '';
  let lastProgress = 0;
  let overBudget = false;
  let result;
  try {
    result = await adapter.complete(
      {
        model,
        messages,
        signal: abort.signal,
        onDelta: async (delta) => {
          text += delta;
          if (costMicros(provider, model, inputEstimate, Math.ceil(text.length / 4)) > budget) {
            overBudget = true;
            abort.abort();
            return;
          }
          if (Date.now() - lastProgress >= PROGRESS_EVERY_MS) {
            lastProgress = Date.now();
            await ctx.progress({ text, model: modelId });
          }
        },
      },
      { apiKey: credentials.apiKey, baseUrl: credentials.baseUrl },
    );
  } catch (error) {
    if (overBudget) throw new PermanentJobError('credits_exhausted', 'The platform credits ran out during the turn.');
    if (error instanceof ProviderError) {
      const code = `provider_${error.kind}`;
      if (error.retryable) throw new RetryableJobError(code, `The model provider failed (${error.kind}); retrying.`);
      throw new PermanentJobError(code, error.kind === 'invalid_key' ? `The ${provider} key was refused; update it in provider keys.` : `The model provider refused the turn (${error.kind}).`);
    }
    throw error;
  } finally {
    ctx.signal.removeEventListener('abort', onParentAbort);
  }
  if (overBudget) throw new PermanentJobError('credits_exhausted', 'The platform credits ran out during the turn.');

  const cost = paidByCredits ? costMicros(provider, model, result.inputTokens, result.outputTokens) : 0;
  return ctx.db.transaction(async (tx) => {
    const inserted = await tx.maybeOneFirst(sql.type(z.object({ id: z.string() }))`
      insert into chat_messages (tenant_id, session_id, role, content, model, job_id)
      values (${ctx.tenantId}, ${input.sessionId}, 'assistant', ${result.text}, ${modelId}, ${ctx.jobId})
      on conflict (job_id) do nothing returning id`);
    if (!inserted) return (await alreadyAnswered(ctx))!; // another attempt got there first
    await tx.query(sql.unsafe`
      insert into usage_records (tenant_id, agent_id, session_id, job_id, provider, model, input_tokens, output_tokens, cost_micros, credential)
      values (${ctx.tenantId}, ${setup.agent_id}, ${input.sessionId}, ${ctx.jobId}, ${provider}, ${modelId},
        ${result.inputTokens}, ${result.outputTokens}, ${cost}, ${paidByCredits ? 'platform_credits' : credentials.source === 'tenant_key' ? 'tenant_key' : 'none'})
      on conflict (job_id) do nothing`);
    // The estimate may have been short: a turn that cost more than is left takes what is left.
    if (cost > 0 && !(await spendCredits(tx, ctx.tenantId, cost))) {
      await tx.query(sql.unsafe`update tenant_credits set balance_micros = 0, updated_at = now() where tenant_id = ${ctx.tenantId}`);
    }
    await tx.query(sql.unsafe`update chat_sessions set updated_at = now() where id = ${input.sessionId}`);
    const answer: TurnResult = { assistantMessageId: inserted, model: modelId, inputTokens: result.inputTokens, outputTokens: result.outputTokens, costMicros: cost };
    await ctx.completeWithin(tx, answer);
    return answer;
  });
}
