// One model call on behalf of a job, shared by chat turns and company runs:
// the plan must allow the model; credentials are the tenant's own key or the
// platform's key on credits; the answer streams to websocket subscribers as
// deltas (core/jobs/deltas.ts, no row write each) and is written as the
// job's progress now and then (1-2 s in, then at doubling intervals: a
// logarithmic number of writes however long the stream); a call that would spend more
// credits than are left stops mid-stream; provider failures become job
// errors (retry or permanent) with stable codes.
import { hostOf } from '../providers/outbound.ts';
import { z } from 'zod';
import type { Config } from '../config.ts';
import type { Keyring } from '../crypto/keyring.ts';
import { sql, type CommonQueryMethods, type DatabasePool } from '../db/pool.ts';
import { PermanentJobError, RetryableJobError } from '../jobs/errors.ts';
import { modelAllowed } from '../chat/models.ts';
import { planOf } from '../plans.ts';
import { credentialsFor, spendCredits } from '../provider-keys/keys.ts';
import { costMicros, parseModel, providerFor } from '../providers/registry.ts';
import { ProviderError, type ChatMessage, type CompletionResult } from '../providers/types.ts';

/** What a model-calling task gets from the worker (see workers/define-task.ts). */
export type ModelTaskContext = {
  db: DatabasePool;
  config: Config;
  keyring: Keyring;
  jobId: string;
  tenantId: string;
  signal: AbortSignal;
  progress: (value: unknown) => Promise<void>;
  /** Streams a piece of the answer at its offset to websocket subscribers. */
  delta?: (offset: number, text: string) => void;
  /** Sends the deltas gathered so far (before the final write). */
  flushDeltas?: () => Promise<void>;
  /** Records the job's result in the given transaction (with the task's writes). */
  completeWithin: (tx: CommonQueryMethods, result: unknown) => Promise<void>;
};

export type ModelCall = {
  modelId: string;
  provider: string;
  result: CompletionResult;
  credential: 'tenant_key' | 'platform_credits' | 'none';
  costMicros: number;
};

/** The first progress write of a stream; each later one waits twice as long as the one before. */
const FIRST_PROGRESS_MS = 1_000;

export async function callModel(
  ctx: ModelTaskContext,
  input: { modelId: string; plan: string; messages: ChatMessage[]; what: string },
): Promise<ModelCall> {
  const { modelId } = input;
  if (!modelAllowed(planOf(input.plan), modelId)) {
    throw new PermanentJobError(
      'model_not_allowed',
      `The ${input.plan} plan does not include ${modelId}; pick an allowed model.`,
    );
  }
  const parsed = parseModel(modelId);
  if (!parsed) throw new PermanentJobError('model_not_found', `Unknown model ${modelId}.`);
  const { provider, model } = parsed;
  const adapter = providerFor(provider, ctx.config.providers);
  const credentials = await credentialsFor(ctx.db, ctx.keyring, ctx.config, ctx.tenantId, provider);
  if (!credentials)
    throw new PermanentJobError('provider_key_missing', `No key for ${provider}: add one in provider keys.`);
  // Platform credits pay for metered providers only (never the offline model or a local Ollama).
  const paidByCredits = credentials.source === 'platform_credits' && adapter.needsKey;
  let budget = Number.POSITIVE_INFINITY;
  if (paidByCredits) {
    budget = await ctx.db.oneFirst(sql.type(z.object({ b: z.number() }))`
      select coalesce((select balance_micros::float8 from tenant_credits where tenant_id = ${ctx.tenantId}), 0) as b`);
    if (budget <= 0)
      throw new PermanentJobError(
        'credits_exhausted',
        'No platform credits left; add credits or your own provider key.',
      );
  }

  const abort = new AbortController();
  const onParentAbort = () => abort.abort();
  ctx.signal.addEventListener('abort', onParentAbort, { once: true });
  const inputEstimate = Math.ceil(input.messages.reduce((n, m) => n + m.content.length, 0) / 4);
  let text = '';
  const started = Date.now();
  // Spread over a second, so turns that started together do not all write at once.
  let nextProgressIn = FIRST_PROGRESS_MS * (1 + Math.random());
  let overBudget = false;
  let result: CompletionResult;
  try {
    result = await adapter.complete(
      {
        model,
        messages: input.messages,
        signal: abort.signal,
        onDelta: async (delta) => {
          const offset = text.length;
          text += delta;
          if (paidByCredits && costMicros(provider, model, inputEstimate, Math.ceil(text.length / 4)) > budget) {
            overBudget = true;
            abort.abort();
            return;
          }
          ctx.delta?.(offset, delta);
          if (Date.now() - started >= nextProgressIn) {
            nextProgressIn *= 2;
            await ctx.progress({ text, model: modelId });
          }
        },
      },
      { apiKey: credentials.apiKey, baseUrl: credentials.baseUrl },
    );
  } catch (error) {
    if (overBudget)
      throw new PermanentJobError('credits_exhausted', `The platform credits ran out during the ${input.what}.`);
    if (error instanceof ProviderError) {
      const code = `provider_${error.kind}`;
      // A Retry-After the provider sent sets when the next attempt comes (the job waits parked, its slot free).
      const detail = `${credentials.baseUrl ? hostOf(credentials.baseUrl) : `${provider} default address`}${error.status ? ` answered ${error.status}` : ''}: ${error.message}`;
      if (error.retryable)
        throw new RetryableJobError(
          code,
          `The model provider failed (${error.kind}); retrying.`,
          error.retryAfterMs,
          detail,
        );
      throw new PermanentJobError(
        code,
        error.kind === 'invalid_key'
          ? `The ${provider} key was refused; update it in provider keys.`
          : `The model provider refused the ${input.what} (${error.kind}).`,
      );
    }
    throw error;
  } finally {
    ctx.signal.removeEventListener('abort', onParentAbort);
    // The last pieces go out before the job's final state can.
    await ctx.flushDeltas?.();
  }
  if (overBudget)
    throw new PermanentJobError('credits_exhausted', `The platform credits ran out during the ${input.what}.`);

  return {
    modelId,
    provider,
    result,
    credential: paidByCredits ? 'platform_credits' : credentials.source === 'tenant_key' ? 'tenant_key' : 'none',
    costMicros: paidByCredits ? costMicros(provider, model, result.inputTokens, result.outputTokens) : 0,
  };
}

/**
 * The call's usage record (once per job) and its charge, in the caller's
 * transaction. A call that cost more than is left takes what is left.
 */
export async function recordModelUsage(
  tx: CommonQueryMethods,
  ctx: Pick<ModelTaskContext, 'tenantId' | 'jobId'>,
  call: ModelCall,
  links: { agentId?: string | null; sessionId?: string | null } = {},
): Promise<void> {
  await tx.query(sql.unsafe`
    insert into usage_records (tenant_id, agent_id, session_id, job_id, provider, model, input_tokens, output_tokens, cost_micros, credential)
    values (${ctx.tenantId}, ${links.agentId ?? null}, ${links.sessionId ?? null}, ${ctx.jobId}, ${call.provider}, ${call.modelId},
      ${call.result.inputTokens}, ${call.result.outputTokens}, ${call.costMicros}, ${call.credential})
    on conflict (job_id) do nothing`);
  if (call.costMicros > 0 && !(await spendCredits(tx, ctx.tenantId, call.costMicros))) {
    await tx.query(
      sql.unsafe`update tenant_credits set balance_micros = 0, updated_at = now() where tenant_id = ${ctx.tenantId}`,
    );
  }
}
