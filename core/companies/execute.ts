// What the company.run task does: task + agent role -> the agent's model ->
// the run's output (and a usage record). Keyed by the job id, so a retry
// after a crash never writes a second output or a second usage record.
import { z } from 'zod';
import { sql } from '../db/pool.ts';
import { PermanentJobError } from '../jobs/errors.ts';
import { callModel, recordModelUsage, type ModelTaskContext } from '../models/call.ts';
import { OFFLINE_MODEL } from '../plans.ts';
import type { ChatMessage } from '../providers/types.ts';
import { withWorkspaceContext } from '../skills/workspace-context.ts';

export const RunInput = z.object({ runId: z.uuid() });
export type RunInput = z.infer<typeof RunInput>;

export type RunResult = { runId: string; model: string; output: string; inputTokens: number; outputTokens: number };

export type RunContext = ModelTaskContext;

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
export function runPrompt(
  s: Pick<
    z.infer<typeof Setup>,
    'company_name' | 'company_description' | 'title' | 'description' | 'agent_name' | 'agent_role'
  >,
): ChatMessage[] {
  const who = `You are ${s.agent_name ?? 'an agent'} of the company ${s.company_name}.${s.agent_role ? ` Your role: ${s.agent_role}` : ''}`;
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
  if (setup.output !== null)
    return { runId: input.runId, model: modelId, output: setup.output, inputTokens: 0, outputTokens: 0 };

  const prompt = await withWorkspaceContext(ctx.db, ctx.tenantId, runPrompt(setup)); // memory and skills
  const call = await callModel(ctx, { modelId, plan: setup.plan, messages: prompt, what: 'run' });
  const { result } = call;
  const answer: RunResult = {
    runId: input.runId,
    model: modelId,
    output: result.text,
    inputTokens: result.inputTokens,
    outputTokens: result.outputTokens,
  };
  return ctx.db.transaction(async (tx) => {
    // The job's final state first: completeWithin lets a 'running' mark under
    // way land before this transaction locks anything. That mark's trigger
    // updates the run (its status mirrors the job's), so taking the run's
    // row first made each wait for the other until statement_timeout.
    // Exactly once: only the attempt that may finish the job writes the
    // output (another that finished it makes completeWithin throw, and this
    // transaction roll back).
    await ctx.completeWithin(tx, answer);
    const written = await tx.maybeOneFirst(sql.type(z.object({ id: z.string() }))`
      update company_runs set output = ${result.text}, model = ${modelId}
      where id = ${input.runId} and job_id = ${ctx.jobId} and output is null returning id`);
    if (written) await recordModelUsage(tx, ctx, call);
    return answer;
  });
}
