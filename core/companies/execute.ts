// What the company.run task does: task + agent role -> the agent's model ->
// the run's output (and a usage record). Keyed by the job id, so a retry
// after a crash never writes a second output or a second usage record.
import { z } from 'zod';
import type { Config } from '../config.ts';
import type { Keyring } from '../crypto/keyring.ts';
import { sql, type CommonQueryMethods, type DatabasePool } from '../db/pool.ts';
import { PermanentJobError, RetryableJobError } from '../jobs/errors.ts';
import { modelAllowed } from '../chat/models.ts';
import { OFFLINE_MODEL, planOf } from '../plans.ts';
import { credentialsFor, spendCredits } from '../provider-keys/keys.ts';
import { costMicros, parseModel, providerFor } from '../providers/registry.ts';
import { ProviderError, type ChatMessage } from '../providers/types.ts';

export const RunInput = z.object({ runId: z.uuid() });
export type RunInput = z.infer<typeof RunInput>;

export type RunResult = { runId: string; model: string; output: string; inputTokens: number; outputTokens: number };

export type RunContext = {
  db: DatabasePool;
  config: Config;
  keyring: Keyring;
  jobId: string;
  tenantId: string;
  signal: AbortSignal;
  progress: (value: unknown) => Promise<void>;
  completeWithin: (tx: CommonQueryMethods, result: unknown) => Promise<boolean>;
};

const PROGRESS_EVERY_MS = 50;

const Setup = z.object({
  output: z.string().nullable(),
  model: z.string().nullable(),
  plan: z.string(),
  company_name: z.string(),
  company_description: z.string(),
  title: z.string(),
  description: z.string(),
  agent_name: z.string().nullable(),
  agent_role: z.string().nullable(),
  agent_model: z.string().nullable(),
});

/** The prompt: who the agent is (its role in the company), then the task. */
export function runPrompt(s: Pick<z.infer<typeof Setup>, 'company_name' | 'company_description' | 'title' | 'description' | 'agent_name' | 'agent_role'>): ChatMessage[] {
  const who = `You are ${s.agent_name ?? 'an agent'} of the company ${s.company_name}.` + (s.agent_role ? ` Your role: ${s.agent_role}` : '');
  const about = s.company_description ? `\nAbout the company: ${s.company_description}` : '';
  return [
    { role: 'system', content: who + about },
    { role: 'user', content: s.description ? `${s.title}\n\n${s.description}` : s.title },
  ];
}

export async function runCompanyTask(input: RunInput, ctx: RunContext): Promise<RunResult> {
  const setup = await ctx.db.maybeOne(sql.type(Setup)`
    select r.output, r.model, t.plan, c.name as company_name, c.description as company_description,
      k.title, k.description, a.name as agent_name, a.role as agent_role, a.model as agent_model
    from company_runs r
    join tenants t on t.id = r.tenant_id
    join companies c on c.id = r.company_id
    join company_tasks k on k.id = r.task_id
    left join company_agents a on a.id = r.agent_id
    where r.id = ${input.runId} and r.tenant_id = ${ctx.tenantId} and r.job_id = ${ctx.jobId}`);
  if (!setup) throw new PermanentJobError('run_not_found', 'The run, its task or its company no longer exists.');
  const modelId = setup.agent_model ?? setup.model ?? OFFLINE_MODEL;
  // Written by an earlier attempt that crashed before the job was recorded.
  if (setup.output !== null) return { runId: input.runId, model: modelId, output: setup.output, inputTokens: 0, outputTokens: 0 };

  if (!modelAllowed(planOf(setup.plan), modelId)) {
    throw new PermanentJobError('model_not_allowed', `The ${setup.plan} plan does not include ${modelId}; pick an allowed model for the agent.`);
  }
  const parsed = parseModel(modelId);
  if (!parsed) throw new PermanentJobError('model_not_found', `Unknown model ${modelId}.`);
  const { provider, model } = parsed;
  const adapter = providerFor(provider, ctx.config.providers);
  const credentials = await credentialsFor(ctx.db, ctx.keyring, ctx.config, ctx.tenantId, provider);
  if (!credentials) throw new PermanentJobError('provider_key_missing', `No key for ${provider}: add one in provider keys.`);
  const paidByCredits = credentials.source === 'platform_credits' && adapter.needsKey;
  if (paidByCredits) {
    const balance = await ctx.db.oneFirst(sql.type(z.object({ b: z.number() }))`
      select coalesce((select balance_micros::float8 from tenant_credits where tenant_id = ${ctx.tenantId}), 0) as b`);
    if (balance <= 0) throw new PermanentJobError('credits_exhausted', 'No platform credits left; add credits or your own provider key.');
  }

  let text = '';
  let lastProgress = 0;
  let result;
  try {
    result = await adapter.complete(
      {
        model,
        messages: runPrompt(setup),
        signal: ctx.signal,
        onDelta: async (delta) => {
          text += delta;
          if (Date.now() - lastProgress >= PROGRESS_EVERY_MS) {
            lastProgress = Date.now();
            await ctx.progress({ text, model: modelId });
          }
        },
      },
      { apiKey: credentials.apiKey, baseUrl: credentials.baseUrl },
    );
  } catch (error) {
    if (error instanceof ProviderError) {
      const code = `provider_${error.kind}`;
      if (error.retryable) throw new RetryableJobError(code, `The model provider failed (${error.kind}); retrying.`);
      throw new PermanentJobError(code, `The model provider refused the run (${error.kind}).`);
    }
    throw error;
  }

  const cost = paidByCredits ? costMicros(provider, model, result.inputTokens, result.outputTokens) : 0;
  const answer: RunResult = { runId: input.runId, model: modelId, output: result.text, inputTokens: result.inputTokens, outputTokens: result.outputTokens };
  return ctx.db.transaction(async (tx) => {
    // Exactly once: only the first attempt to get here writes the output.
    const written = await tx.maybeOneFirst(sql.type(z.object({ id: z.string() }))`
      update company_runs set output = ${result.text}, model = ${modelId}
      where id = ${input.runId} and job_id = ${ctx.jobId} and output is null returning id`);
    if (!written) return answer;
    await tx.query(sql.unsafe`
      insert into usage_records (tenant_id, job_id, provider, model, input_tokens, output_tokens, cost_micros, credential)
      values (${ctx.tenantId}, ${ctx.jobId}, ${provider}, ${modelId}, ${result.inputTokens}, ${result.outputTokens}, ${cost},
        ${paidByCredits ? 'platform_credits' : credentials.source === 'tenant_key' ? 'tenant_key' : 'none'})
      on conflict (job_id) do nothing`);
    if (cost > 0 && !(await spendCredits(tx, ctx.tenantId, cost))) {
      await tx.query(sql.unsafe`update tenant_credits set balance_micros = 0, updated_at = now() where tenant_id = ${ctx.tenantId}`);
    }
    await ctx.completeWithin(tx, answer);
    return answer;
  });
}
