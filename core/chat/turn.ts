// One chat turn, run by the chat.turn task: history -> model -> assistant
// message + usage record. Keyed by the job id, so a retry after a crash or a
// broken stream never writes a second message or a second usage record.
import { z } from 'zod';
import { sql, type CommonQueryMethods } from '../db/pool.ts';
import { enqueueChannelReply } from '../channels/deliver.ts';
import { PermanentJobError } from '../jobs/errors.ts';
import { callModel, recordModelUsage, type ModelTaskContext } from '../models/call.ts';
import { OFFLINE_MODEL } from '../plans.ts';
import type { ChatMessage } from '../providers/types.ts';
import { withWorkspaceContext } from '../skills/workspace-context.ts';

export const TurnInput = z.object({ sessionId: z.uuid(), userMessageId: z.uuid() });
export type TurnInput = z.infer<typeof TurnInput>;

export type TurnResult = {
  assistantMessageId: string;
  /** The whole answer (its stream's deltas put together). */
  text: string;
  model: string;
  inputTokens: number;
  outputTokens: number;
  costMicros: number;
};

/** `attempt` is Graphile's count for this job: 1 on its first run. */
export type TurnContext = ModelTaskContext & { attempt: number };

const HISTORY_LIMIT = 50;

const History = z.object({
  role: z.enum(['user', 'assistant', 'system']),
  content: z.string(),
  attachments: z.array(z.unknown()),
});
const Setup = z.object({
  model: z.string().nullable(),
  plan: z.string(),
  agent_id: z.string().nullable(),
  user_seq: z.number().nullable(),
  from_channel: z.boolean(),
  history: z.array(History),
});

/** `q`: the pool, or the transaction when asked inside one (slonik refuses the pool there). */
async function alreadyAnswered(q: CommonQueryMethods, ctx: TurnContext): Promise<TurnResult | null> {
  return q.maybeOne(sql.type(
    z.object({
      assistantMessageId: z.string(),
      text: z.string(),
      model: z.string(),
      inputTokens: z.number(),
      outputTokens: z.number(),
      costMicros: z.number(),
    }),
  )`
    select m.id as "assistantMessageId", m.content as text, coalesce(m.model, u.model, '') as model,
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
  // Only an attempt of this job writes its answer, so a first attempt has
  // none to find; a retry looks first and does not call the model again.
  if (ctx.attempt > 1) {
    const done = await alreadyAnswered(ctx.db, ctx);
    if (done) return done;
  }

  // The session's model and plan, the history up to this turn's message, and
  // whether the message came from a messaging channel, in one round trip.
  const setup = await ctx.db.maybeOne(sql.type(Setup)`
    with setup as (
      select coalesce(s.model, a.model) as model, t.plan, s.agent_id, s.id as session_id,
        (select seq from chat_messages where id = ${input.userMessageId} and session_id = s.id) as user_seq
      from chat_sessions s join tenants t on t.id = s.tenant_id left join agents a on a.id = s.agent_id
      where s.id = ${input.sessionId} and s.tenant_id = ${ctx.tenantId})
    select model, plan, agent_id, user_seq,
      exists (select 1 from channel_updates u where u.message_id = ${input.userMessageId}) as from_channel, coalesce((
      select json_agg(json_build_object('role', h.role, 'content', h.content, 'attachments', h.attachments) order by h.seq)
      from (select role, content, attachments, seq from chat_messages
        where session_id = setup.session_id and seq <= setup.user_seq order by seq desc limit ${HISTORY_LIMIT}) h), '[]'::json) as history
    from setup`);
  if (!setup || setup.user_seq === null)
    throw new PermanentJobError('session_not_found', 'The session or its message no longer exists.');
  const messages: ChatMessage[] = setup.history.map((r) => ({
    role: r.role,
    content: withAttachments(r.content, r.attachments),
  }));
  // The workspace's memory and skills go first, so changing them changes the next answer.
  const prompt = await withWorkspaceContext(ctx.db, ctx.tenantId, messages);
  const call = await callModel(ctx, {
    modelId: setup.model ?? OFFLINE_MODEL,
    plan: setup.plan,
    messages: prompt,
    what: 'turn',
  });
  const { result, modelId } = call;

  return ctx.db.transaction(async (tx) => {
    // The answer, and the session touched by it, in one statement.
    const inserted = await tx.maybeOneFirst(sql.type(z.object({ id: z.string() }))`
      with answer as (
        insert into chat_messages (tenant_id, session_id, role, content, model, job_id)
        values (${ctx.tenantId}, ${input.sessionId}, 'assistant', ${result.text}, ${modelId}, ${ctx.jobId})
        on conflict (job_id) where job_id is not null do nothing returning id
      ), touched as (
        update chat_sessions set updated_at = now() where id = ${input.sessionId} and exists (select 1 from answer)
      )
      select id from answer`);
    if (!inserted) return (await alreadyAnswered(tx, ctx))!; // another attempt got there first
    await recordModelUsage(tx, ctx, call, { agentId: setup.agent_id, sessionId: input.sessionId });
    // A message that came from a messaging channel: its reply, once per turn, in this commit.
    if (setup.from_channel)
      await enqueueChannelReply(tx, {
        tenantId: ctx.tenantId,
        turnJobId: ctx.jobId,
        userMessageId: input.userMessageId,
        text: result.text,
      });
    const answer: TurnResult = {
      assistantMessageId: inserted,
      text: result.text,
      model: modelId,
      inputTokens: result.inputTokens,
      outputTokens: result.outputTokens,
      costMicros: call.costMicros,
    };
    await ctx.completeWithin(tx, answer);
    return answer;
  });
}
