// Chat provisioning, sessions and messages. Every query is scoped by the
// tenant the caller acts in.
import { z } from 'zod';
import { sql, type CommonQueryMethods, type DatabasePool } from '../db/pool.ts';
import { decodeCursor, pageOf } from '../paging.ts';
import { OFFLINE_MODEL } from '../plans.ts';
import { createTenant } from '../tenants/tenants.ts';

export const SessionRow = z.object({
  id: z.string(),
  title: z.string(),
  agent_id: z.string().nullable(),
  model: z.string().nullable(),
  created_at: z.string(),
  updated_at: z.string(),
});
export type SessionRow = z.infer<typeof SessionRow>;
const sessionRow = sql.type(SessionRow);
const SESSION_COLUMNS = sql.fragment`id, title, agent_id, model, created_at, updated_at`;

/** The tenant's default agent, created on first need (model: the offline one). */
export async function defaultAgent(tx: CommonQueryMethods, tenantId: string): Promise<{ id: string; model: string }> {
  const existing = await tx.maybeOne(sql.type(z.object({ id: z.string(), model: z.string() }))`
    select id, model from agents where tenant_id = ${tenantId} and is_default`);
  if (existing) return existing;
  return tx.one(sql.type(z.object({ id: z.string(), model: z.string() }))`
    insert into agents (tenant_id, name, model, is_default) values (${tenantId}, 'Assistant', ${OFFLINE_MODEL}, true)
    on conflict (tenant_id) where is_default do update set name = agents.name
    returning id, model`);
}

export type Provisioned = { tenantId: string; agentId: string; sessionId: string; created: boolean };

/**
 * POST /api/chat/init: the user's first tenant (where they are Admin), its
 * default agent and latest session, creating whatever is missing. A second
 * call returns the same ids.
 */
export async function provisionChat(
  db: DatabasePool,
  userId: string,
  newTenantCreditsMicros: number,
): Promise<Provisioned> {
  return db.transaction(async (tx) => {
    // One provisioning per user at a time: two inits never make two of anything.
    await tx.query(sql.unsafe`select pg_advisory_xact_lock(hashtext('chat-init:' || ${userId}))`);
    const existing = await tx.maybeOneFirst(sql.type(z.object({ tenant_id: z.string() }))`
      select m.tenant_id from tenant_memberships m join tenants t on t.id = m.tenant_id
      where m.user_id = ${userId} and m.role = 'admin' order by t.created_at, t.id limit 1`);
    const tenantId = existing ?? (await createTenant(tx, userId, 'My workspace', newTenantCreditsMicros)).id;
    const agent = await defaultAgent(tx, tenantId);
    const session = await tx.maybeOneFirst(sql.type(z.object({ id: z.string() }))`
      select id from chat_sessions where tenant_id = ${tenantId} order by created_at desc, id desc limit 1`);
    if (session) return { tenantId, agentId: agent.id, sessionId: session, created: !existing };
    const sessionId = await tx.oneFirst(sql.type(z.object({ id: z.string() }))`
      insert into chat_sessions (tenant_id, title, agent_id, created_by) values (${tenantId}, 'New session', ${agent.id}, ${userId}) returning id`);
    return { tenantId, agentId: agent.id, sessionId, created: true };
  });
}

export class UnknownAgentError extends Error {
  override name = 'UnknownAgentError';
}

export async function createChatSession(
  db: DatabasePool,
  tenantId: string,
  userId: string,
  input: { title?: string | undefined; agentId?: string | undefined; model?: string | undefined },
): Promise<SessionRow> {
  return db.transaction(async (tx) => {
    const agentId = input.agentId
      ? await tx.maybeOneFirst(
          sql.type(
            z.object({ id: z.string() }),
          )`select id from agents where id = ${input.agentId} and tenant_id = ${tenantId}`,
        )
      : (await defaultAgent(tx, tenantId)).id;
    if (!agentId) throw new UnknownAgentError('No such agent in this tenant.');
    return tx.one(sessionRow`
      insert into chat_sessions (tenant_id, title, agent_id, model, created_by)
      values (${tenantId}, ${input.title ?? 'New session'}, ${agentId}, ${input.model ?? null}, ${userId})
      returning ${SESSION_COLUMNS}`);
  });
}

export async function listSessions(db: CommonQueryMethods, tenantId: string, limit: number, cursor?: string) {
  const after = cursor ? decodeCursor(cursor) : null;
  const rows = await db.any(sql.type(SessionRow.extend({ cursor_t: z.string() }))`
    select ${SESSION_COLUMNS}, created_at::text as cursor_t from chat_sessions
    where tenant_id = ${tenantId}
      ${after ? sql.fragment`and (created_at, id) < (${after.t}::timestamptz, ${after.id}::uuid)` : sql.fragment``}
    order by created_at desc, id desc limit ${limit + 1}`);
  return pageOf(rows, limit);
}

export async function findSession(
  db: CommonQueryMethods,
  tenantId: string,
  sessionId: string,
): Promise<SessionRow | null> {
  return db.maybeOne(
    sessionRow`select ${SESSION_COLUMNS} from chat_sessions where id = ${sessionId} and tenant_id = ${tenantId}`,
  );
}

export const MessageRow = z.object({
  id: z.string(),
  seq: z.number(),
  session_id: z.string(),
  role: z.enum(['user', 'assistant', 'system']),
  content: z.string(),
  attachments: z.array(z.unknown()),
  company_scope: z.string().nullable(),
  model: z.string().nullable(),
  job_id: z.string().nullable(),
  created_at: z.string(),
});
export type MessageRow = z.infer<typeof MessageRow>;
export const messageRow = sql.type(MessageRow);
export const MESSAGE_COLUMNS = sql.fragment`id, seq, session_id, role, content, attachments, company_scope, model, job_id, created_at`;

/** Oldest to newest; the cursor is the position after the last message seen. */
export async function listMessages(
  db: CommonQueryMethods,
  tenantId: string,
  sessionId: string,
  limit: number,
  cursor?: string,
) {
  const afterSeq = cursor ? decodeSeqCursor(cursor) : 0;
  const rows = await db.any(messageRow`
    select ${MESSAGE_COLUMNS} from chat_messages
    where tenant_id = ${tenantId} and session_id = ${sessionId} and seq > ${afterSeq}
    order by seq limit ${limit + 1}`);
  const items = rows.slice(0, limit);
  const last = items.at(-1);
  return { items, nextCursor: rows.length > limit && last ? Buffer.from(`m:${last.seq}`).toString('base64url') : null };
}

export class InvalidMessageCursorError extends Error {
  override name = 'InvalidMessageCursorError';
}

function decodeSeqCursor(cursor: string): number {
  const match = /^m:(\d{1,18})$/.exec(Buffer.from(cursor, 'base64url').toString('utf8'));
  if (!match) throw new InvalidMessageCursorError('cursor is not one this list issued');
  return Number(match[1]);
}
