// Sessions of a tenant with their agent and state, and one session's entries:
// its messages and its jobs' events (chat turns, channel deliveries ... any
// job enqueued with the session's id) in the order they happened.
import { z } from 'zod';
import { sql, type CommonQueryMethods } from '../db/pool.ts';
import { decodeActivityCursor, encodeActivityCursor, mergePage, type ActivityPosition } from './cursor.ts';

export const SESSION_STATES = ['active', 'idle', 'failed'] as const;
export type SessionState = (typeof SESSION_STATES)[number];

export type SessionFilter = {
  agentId?: string | undefined;
  status?: SessionState | undefined;
  from?: string | undefined;
  to?: string | undefined;
};

const SessionRow = z.object({
  id: z.string(),
  title: z.string(),
  agent_id: z.string().nullable(),
  agent_name: z.string().nullable(),
  model: z.string().nullable(),
  created_at: z.string(),
  updated_at: z.string(),
  t: z.string(),
  messages: z.number(),
  last_job_status: z.string().nullable(),
  state: z.enum(SESSION_STATES),
});
export type ActivitySessionRow = z.infer<typeof SessionRow>;

/**
 * Newest first by (created_at, id). A session's state comes from its latest
 * job: active while that job is queued or running, failed when it failed,
 * idle otherwise.
 */
export async function listActivitySessions(
  db: CommonQueryMethods,
  tenantId: string,
  filter: SessionFilter,
  limit: number,
  cursor?: string,
) {
  const after = decodeActivityCursor(cursor);
  const conditions = [sql.fragment`s.tenant_id = ${tenantId}`];
  if (after) conditions.push(sql.fragment`(s.created_at, s.id) < (${after.t}::timestamptz, ${after.id}::uuid)`);
  if (filter.agentId) conditions.push(sql.fragment`s.agent_id = ${filter.agentId}`);
  if (filter.from) conditions.push(sql.fragment`s.created_at >= ${filter.from}::timestamptz`);
  if (filter.to) conditions.push(sql.fragment`s.created_at < ${filter.to}::timestamptz`);
  const rows = await db.any(sql.type(SessionRow)`
    select * from (
      select s.id, s.title, s.agent_id, a.name as agent_name, coalesce(s.model, a.model) as model, s.created_at, s.updated_at,
        s.created_at::text as t,
        (select count(*) from chat_messages m where m.session_id = s.id)::int as messages,
        j.status as last_job_status,
        case when j.status in ('queued', 'running', 'cancelling') then 'active' when j.status = 'failed' then 'failed' else 'idle' end as state
      from chat_sessions s
      left join agents a on a.id = s.agent_id
      left join lateral (select status from jobs where session_id = s.id order by created_at desc limit 1) j on true
      where ${sql.join(conditions, sql.fragment` and `)}
      order by s.created_at desc, s.id desc
    ) x ${filter.status ? sql.fragment`where state = ${filter.status}` : sql.fragment``}
    limit ${limit + 1}`);
  const items = rows.slice(0, limit);
  const last = items.at(-1);
  return {
    items,
    nextCursor: rows.length > limit && last ? encodeActivityCursor({ t: last.t, s: 0, id: last.id, o: 0 }) : null,
  };
}

export async function sessionInTenant(db: CommonQueryMethods, tenantId: string, sessionId: string): Promise<boolean> {
  return (
    (await db.maybeOneFirst(
      sql.type(
        z.object({ id: z.string() }),
      )`select id from chat_sessions where id = ${sessionId} and tenant_id = ${tenantId}`,
    )) !== null
  );
}

const MessageEntry = z.object({
  id: z.string(),
  t: z.string(),
  at: z.string(),
  role: z.string(),
  content: z.string(),
  attachments: z.array(z.unknown()),
  model: z.string().nullable(),
  job_id: z.string().nullable(),
});
const JobEntry = z.object({
  id: z.string(),
  t: z.string(),
  at: z.string(),
  job_id: z.string(),
  job_kind: z.string(),
  event: z.string(),
  attempt: z.number(),
  status: z.string().nullable(),
  progress: z.unknown().nullable(),
  error: z.unknown().nullable(),
});
export type SessionEntry =
  | { type: 'message'; at: string; message: z.infer<typeof MessageEntry>; pos: ActivityPosition }
  | { type: 'job'; at: string; job: z.infer<typeof JobEntry>; pos: ActivityPosition };

const MESSAGE = 0;
const JOB_EVENT = 1;
// A job's first "queued" comes from its jobs row (0030); at one instant it
// sorts after the messages and the recorded events.
const JOB_QUEUED = 2;

/** Oldest first; the cursor is the position after the last entry seen. */
export async function listSessionEntries(
  db: CommonQueryMethods,
  tenantId: string,
  sessionId: string,
  limit: number,
  cursor?: string,
) {
  const after = decodeActivityCursor(cursor);
  const messageAfter = !after
    ? sql.fragment`true`
    : after.s === MESSAGE
      ? sql.fragment`(created_at, id) > (${after.t}::timestamptz, ${after.id}::uuid)`
      : sql.fragment`created_at > ${after.t}::timestamptz`;
  const eventAfter = !after
    ? sql.fragment`true`
    : after.s === JOB_EVENT
      ? sql.fragment`(e.at, e.id) > (${after.t}::timestamptz, ${after.id}::bigint)`
      : after.s === MESSAGE
        ? sql.fragment`e.at >= ${after.t}::timestamptz`
        : sql.fragment`e.at > ${after.t}::timestamptz`;
  const queuedAfter = !after
    ? sql.fragment`true`
    : after.s === JOB_QUEUED
      ? sql.fragment`(j.created_at, j.id) > (${after.t}::timestamptz, ${after.id}::uuid)`
      : sql.fragment`j.created_at >= ${after.t}::timestamptz`;
  const [messages, events, queued] = await Promise.all([
    db.any(sql.type(MessageEntry)`
      select id, created_at::text as t, created_at as at, role, content, attachments, model, job_id from chat_messages
      where session_id = ${sessionId} and tenant_id = ${tenantId} and ${messageAfter}
      order by created_at, id limit ${limit + 1}`),
    db.any(sql.type(JobEntry)`
      select e.id::text as id, e.at::text as t, e.at, e.job_id, e.job_kind, e.event, e.attempt,
        j.status, case when e.event in ('progress', 'started') then j.progress end as progress,
        case when e.event = 'failed' then j.error end as error
      from session_job_events e left join jobs j on j.id = e.job_id
      where e.session_id = ${sessionId} and e.tenant_id = ${tenantId} and ${eventAfter}
      order by e.at, e.id limit ${limit + 1}`),
    db.any(sql.type(JobEntry)`
      select j.id::text as id, j.created_at::text as t, j.created_at as at, j.id as job_id, j.kind as job_kind, 'queued' as event, 0 as attempt,
        j.status, null as progress, null as error
      from jobs j
      where j.session_id = ${sessionId} and j.tenant_id = ${tenantId} and ${queuedAfter}
      order by j.created_at, j.id limit ${limit + 1}`),
  ]);
  const rows: SessionEntry[] = [
    ...messages.map((m) => ({
      type: 'message' as const,
      at: m.at,
      message: m,
      pos: { t: m.t, s: MESSAGE, id: m.id, o: 0 },
    })),
    ...events.map((e) => ({ type: 'job' as const, at: e.at, job: e, pos: { t: e.t, s: JOB_EVENT, id: e.id, o: 0 } })),
    ...queued.map((e) => ({ type: 'job' as const, at: e.at, job: e, pos: { t: e.t, s: JOB_QUEUED, id: e.id, o: 0 } })),
  ];
  return mergePage(rows, limit, 'asc');
}
