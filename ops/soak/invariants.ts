// The soak's verdict: what must hold after any mix of load and faults, each
// checked against the database and against what the clients saw, with a
// count of what was checked and examples of what was violated.
import { z } from 'zod';
import { sql, type DatabasePool } from '../../core/db/pool.ts';
import type { AgentWorkload } from './agents.ts';
import type { ChatWorkload } from './chat.ts';
import type { SoakClient } from './client.ts';
import type { Followers } from './followers.ts';

export type Invariant = { name: string; checked: number; violations: string[]; note?: string };
export type Window = { from: number; to: number };
/** A 503 this long after PostgreSQL is back still belongs to the outage (pools reconnect). */
const OUTAGE_TAIL_MS = 15_000;

const MessageRow = z.object({ session_id: z.string(), job_id: z.string().nullable(), role: z.string() });
const JobRow = z.object({ id: z.string(), status: z.string(), version: z.number() });

export async function checkInvariants(input: {
  db: DatabasePool;
  chat: ChatWorkload;
  agents: AgentWorkload;
  followers: Followers;
  client: SoakClient;
  outages: Window[];
}): Promise<Invariant[]> {
  const { db, chat, agents, followers, client } = input;
  const out: Invariant[] = [];
  const sent = chat.sent;
  const jobIds = sent.map((s) => s.jobId);

  // 1. Every accepted send has exactly one answer, and a session's answers follow its sends.
  const messages = await db.any(sql.type(MessageRow)`
    select session_id, job_id, role from chat_messages
    where session_id = any(${sql.array([...new Set(sent.map((s) => s.sessionId))], 'uuid')}) order by session_id, seq`);
  const answers = new Map<string, number>();
  for (const m of messages)
    if (m.role === 'assistant' && m.job_id) answers.set(m.job_id, (answers.get(m.job_id) ?? 0) + 1);
  const once: string[] = [];
  for (const s of sent)
    if (answers.get(s.jobId) !== 1) once.push(`send ${s.key} (job ${s.jobId}): ${answers.get(s.jobId) ?? 0} answers`);
  out.push({ name: 'every send answered 202 has exactly one answer', checked: sent.length, violations: once });
  const orderOf = new Map(sent.map((s) => [s.jobId, s.order]));
  const order: string[] = [];
  const lastOrder = new Map<string, { n: number; jobId: string }>();
  for (const m of messages) {
    const n = m.role === 'assistant' && m.job_id ? orderOf.get(m.job_id) : undefined;
    if (n === undefined) continue;
    const last = lastOrder.get(m.session_id);
    if (last && last.n > n)
      order.push(
        `session ${m.session_id}: the answer to send ${n} (job ${m.job_id}) came after send ${last.n}'s (job ${last.jobId})`,
      );
    if (!last || n > last.n) lastOrder.set(m.session_id, { n, jobId: m.job_id! });
  }
  out.push({ name: "a session's answers are in send order", checked: lastOrder.size, violations: order });
  const userMessages = new Map<string, number>();
  for (const m of messages)
    if (m.role === 'user') userMessages.set(m.session_id, (userMessages.get(m.session_id) ?? 0) + 1);
  const accepted = new Map<string, number>();
  for (const s of sent) accepted.set(s.sessionId, (accepted.get(s.sessionId) ?? 0) + 1);
  const unanswered = [...chat.refused.values()].reduce((a, b) => a + b, 0);
  const extra = [...accepted]
    .filter(([session, n]) => (userMessages.get(session) ?? 0) !== n)
    .map(([session, n]) => `session ${session}: ${userMessages.get(session)} messages for ${n} accepted sends`);
  // A send that was never answered may still have been stored: it is not a duplicate.
  const surplus = [...accepted].reduce(
    (sum, [session, n]) => sum + Math.max(0, (userMessages.get(session) ?? 0) - n),
    0,
  );
  out.push({
    name: 'no send stored twice',
    checked: sent.length,
    violations: surplus > unanswered ? extra : [],
    note: unanswered ? `${unanswered} sends never answered` : undefined,
  });

  // 2. Idempotency: replays answered the first answer byte for byte; no mutation happened twice.
  const replays = [...chat.replays, ...agents.replays];
  out.push({
    name: 'every Idempotency-Key replay got the first answer byte for byte',
    checked: replays.length,
    violations: replays
      .filter((r) => !r.same)
      .map((r) => `${r.route} ${r.key}: first ${r.first.slice(0, 120)}, then ${r.again.slice(0, 120)}`),
  });
  const twice: string[] = [];
  const boards = await db.any(sql.type(z.object({ id: z.string(), tenant_id: z.string(), latest_version: z.number() }))`
    select id, tenant_id, latest_version from insight_boards where tenant_id = any(${sql.array([...new Set(agents.mutations.map((m) => m.agent.tenantId))], 'uuid')})`);
  const creates = agents.mutations.filter((m) => m.kind === 'create');
  const unansweredAgent = [...agents.unanswered.values()].reduce((a, b) => a + b, 0);
  if (boards.length > creates.length + unansweredAgent)
    twice.push(`${boards.length} boards for ${creates.length} answered creates`);
  // A save retried after an attempt ended unsure (its api killed, or
  // PostgreSQL gone during its commit) still runs once: its answer is
  // recorded in its own transaction, so the retry replays or runs it anew.
  let retriedUnsure = 0;
  for (const create of creates) {
    const saves = agents.mutations.filter((m) => m.kind === 'save' && m.boardId === create.boardId);
    retriedUnsure += saves.filter((m) => m.unsure).length;
    const row = boards.find((b) => b.id === create.boardId);
    if (!row) continue;
    if (row.latest_version > create.version + saves.length + unansweredAgent)
      twice.push(`board ${row.id}: version ${row.latest_version} after ${saves.length} answered saves`);
  }
  out.push({
    name: 'no mutation happened twice',
    checked: agents.mutations.length,
    violations: twice,
    note: retriedUnsure
      ? `${retriedUnsure} saves retried after an attempt ended unsure (api killed, or PostgreSQL gone at their commit)`
      : undefined,
  });

  // 3. Jobs: all final; none changed after its final state; followers saw it, in order.
  const notFinal = await db.anyFirst(
    sql.type(
      z.object({ id: z.string() }),
    )`select id from jobs where status not in ('succeeded', 'failed', 'cancelled') limit 20`,
  );
  const total = await db.oneFirst(sql.type(z.object({ n: z.number() }))`select count(*)::int as n from jobs`);
  out.push({ name: 'every job is final', checked: total, violations: notFinal.map((id) => `job ${id}`) });
  const rows = new Map(
    (
      await db.any(sql.type(JobRow)`select id, status, version from jobs where id = any(${sql.array(jobIds, 'uuid')})`)
    ).map((r) => [r.id, r]),
  );
  const changed: string[] = chat.changedAfterFinal.map(
    (c) =>
      `job ${c.jobId}: polled ${c.before.status} v${c.before.version}, later ${c.after.status} v${c.after.version}`,
  );
  const finalsSeen = [
    ...chat.polledFinal.entries(),
    ...[...followers.jobs.entries()].flatMap(([id, f]) => (f.final ? [[id, f.final] as const] : [])),
  ];
  for (const [id, seen] of finalsSeen) {
    const row = rows.get(id);
    if (row && (row.version !== seen.version || row.status !== seen.status))
      changed.push(`job ${id}: seen final ${seen.status} v${seen.version}, now ${row.status} v${row.version}`);
  }
  for (const [id, f] of followers.jobs)
    for (const after of f.afterFinal)
      changed.push(`job ${id}: websocket sent ${after.status} v${after.version} after its final state`);
  out.push({ name: 'no job changed after its final state', checked: finalsSeen.length, violations: changed });
  const followed: string[] = [];
  for (const [id, f] of followers.jobs) {
    if (!f.final)
      followed.push(
        `job ${id}: no final state over the websocket (saw ${f.states.map((s) => `${s.status} v${s.version}`).join(', ') || 'nothing'})`,
      );
    for (let i = 1; i < f.states.length; i++) {
      if (f.states[i]!.version < f.states[i - 1]!.version)
        followed.push(`job ${id}: v${f.states[i]!.version} after v${f.states[i - 1]!.version}`);
    }
  }
  out.push({
    name: "every websocket follower saw its job's final state, states in order",
    checked: followers.jobs.size,
    violations: followed,
    note: `${followers.reconnects} reconnections`,
  });
  const failed = [...rows.values()].filter((r) => r.status !== 'succeeded').map((r) => `job ${r.id}: ${r.status}`);
  out.push({ name: 'every accepted chat turn succeeded', checked: rows.size, violations: failed });

  // 4. Nothing acknowledged was lost (a failover to a standby that lacked the last commits would lose some).
  const lost: string[] = [];
  const storedMessages = new Set(
    await db.anyFirst(sql.type(z.object({ id: z.string() }))`
    select id from chat_messages where id = any(${sql.array(
      sent.map((s) => s.messageId),
      'uuid',
    )})`),
  );
  for (const s of sent) {
    if (!storedMessages.has(s.messageId)) lost.push(`send ${s.key}: its message ${s.messageId} (answered 202) is gone`);
    if (!rows.has(s.jobId)) lost.push(`send ${s.key}: its job ${s.jobId} (answered 202) is gone`);
  }
  const boardVersions = new Map(boards.map((b) => [b.id, b.latest_version]));
  for (const m of agents.mutations) {
    const version = boardVersions.get(m.boardId);
    if (version === undefined || version < m.version)
      lost.push(`${m.kind} ${m.key}: board ${m.boardId} answered version ${m.version}, holds ${version ?? 'nothing'}`);
  }
  out.push({
    name: 'nothing acknowledged was lost (every 2xx send and mutation is there)',
    checked: sent.length * 2 + agents.mutations.length,
    violations: lost,
  });
  // A wake-up locked now may be at work (a scheduled task firing as the run ends); one held 30 s after all is quiet was left.
  const locked = await db.anyFirst(sql.type(z.object({ id: z.string() }))`
    select id::text || ' (' || task_identifier || ', locked by ' || locked_by || ' for ' || round(extract(epoch from now() - locked_at)) || ' s)' as id
    from graphile_worker.jobs where locked_at < now() - interval '30 seconds' limit 20`);
  out.push({
    name: 'no Graphile Worker job is left locked',
    checked: 1,
    violations: locked.map((id) => `graphile job ${id}`),
  });

  // 5. Server errors: only 503 (with Retry-After), and only while PostgreSQL was away.
  const during = (at: number) => input.outages.some((w) => at >= w.from && at <= w.to + OUTAGE_TAIL_MS);
  const bad = client.serverErrors.filter((e) => e.status !== 503 || !during(e.at));
  const count503 = client.serverErrors.length - bad.length;
  out.push({
    name: 'no 5xx other than 503 during a PostgreSQL outage',
    checked: [...client.statuses.values()].reduce((a, b) => a + b, 0),
    violations: bad.map((e) => `${e.status} ${e.method} ${e.route} at ${new Date(e.at).toISOString()}: ${e.body}`),
    note: `${count503} answers were 503 during outages`,
  });
  const bare = client.serverErrors.filter((e) => e.status === 503 && !e.retryAfter);
  out.push({
    name: 'every 503 said when to retry (Retry-After)',
    checked: client.serverErrors.filter((e) => e.status === 503).length,
    violations: bare.map((e) => `${e.method} ${e.route} at ${new Date(e.at).toISOString()}: ${e.body}`),
  });

  return out;
}
