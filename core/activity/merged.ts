// Activity lists merged from two sources, newest first: files (memory files
// and message attachments) and scheduled runs (the platform's own recorded
// runs and those the tenant posted to /api/usage/cron-runs).
import { z } from 'zod';
import { sql, type CommonQueryMethods } from '../db/pool.ts';
import { decodeActivityCursor, mergePage, type ActivityPosition } from './cursor.ts';

const MEMORY = 0;
const ATTACHMENT = 1;

const FileRow = z.object({
  source: z.enum(['memory', 'attachment']),
  t: z.string(),
  id: z.string(),
  o: z.number(),
  name: z.string(),
  media_type: z.string().nullable(),
  bytes: z.number().nullable(),
  session_id: z.string().nullable(),
  message_id: z.string().nullable(),
  created_at: z.string(),
  updated_at: z.string().nullable(),
});
export type ActivityFileRow = z.infer<typeof FileRow>;

export async function listActivityFiles(
  db: CommonQueryMethods,
  tenantId: string,
  source: 'memory' | 'attachment' | undefined,
  limit: number,
  cursor?: string,
) {
  const after = decodeActivityCursor(cursor);
  const position = (s: number) =>
    after
      ? sql.fragment`and (t_at, ${s}, id_text, o) < (${after.t}::timestamptz, ${after.s}, ${after.id}, ${after.o})`
      : sql.fragment``;
  const queries: Promise<readonly ActivityFileRow[]>[] = [];
  if (source !== 'attachment') {
    queries.push(
      db.any(sql.type(FileRow)`
      select 'memory' as source, t_at::text as t, id_text as id, o, name, 'text/plain' as media_type, bytes, null as session_id, null as message_id, created_at, updated_at
      from (select f.*, f.created_at as t_at, f.id::text as id_text, 0 as o from memory_files f where f.tenant_id = ${tenantId}) x
      where true ${position(MEMORY)}
      order by t_at desc, id_text desc limit ${limit + 1}`),
    );
  }
  if (source !== 'memory') {
    // Messages are narrowed on the index first, then their attachments expanded.
    // After a memory file at t every attachment at t was shown (attachments sort first at equal times).
    const messageBound = !after
      ? sql.fragment``
      : after.s === ATTACHMENT
        ? sql.fragment`and (m.created_at, m.id) <= (${after.t}::timestamptz, ${after.id}::uuid)`
        : sql.fragment`and m.created_at < ${after.t}::timestamptz`;
    queries.push(
      db.any(sql.type(FileRow)`
      select 'attachment' as source, t_at::text as t, id_text as id, o, name, media_type, bytes, session_id, message_id, created_at, null as updated_at
      from (
        select m.created_at as t_at, m.id::text as id_text, a.o::int as o, coalesce(a.v->>'name', '') as name, a.v->>'mediaType' as media_type,
          case when a.v ? 'text' then octet_length(a.v->>'text') end as bytes, m.session_id, m.id as message_id, m.created_at
        from (select * from chat_messages m where m.tenant_id = ${tenantId} and m.attachments <> '[]'::jsonb ${messageBound}
              order by m.created_at desc, m.id desc limit ${limit + 2}) m,
          jsonb_array_elements(m.attachments) with ordinality a(v, o)
      ) x
      where true ${position(ATTACHMENT)}
      order by t_at desc, id_text desc, o desc limit ${limit + 1}`),
    );
  }
  const rows = (await Promise.all(queries)).flat().map((r) => ({
    ...r,
    pos: { t: r.t, s: r.source === 'memory' ? MEMORY : ATTACHMENT, id: r.id, o: r.o } as ActivityPosition,
  }));
  return mergePage(rows, limit, 'desc');
}

const PLATFORM = 0;
const TENANT = 1;
export const CRON_SOURCES = ['platform', 'tenant'] as const;

const CronRow = z.object({
  source: z.enum(CRON_SOURCES),
  t: z.string(),
  id: z.string(),
  name: z.string(),
  task: z.string().nullable(),
  status: z.string(),
  started_at: z.string(),
  finished_at: z.string().nullable(),
  duration_ms: z.number().nullable(),
  detail: z.unknown().nullable(),
});
export type ActivityCronRow = z.infer<typeof CronRow>;

/**
 * The platform's runs carry no tenant: they are listed to every tenant
 * without their detail or error (which may count other tenants' rows).
 */
export async function listActivityCronRuns(
  db: CommonQueryMethods,
  tenantId: string,
  filter: { source?: (typeof CRON_SOURCES)[number] | undefined; status?: string | undefined },
  limit: number,
  cursor?: string,
) {
  const after = decodeActivityCursor(cursor);
  const queries: Promise<readonly ActivityCronRow[]>[] = [];
  if (filter.source !== 'tenant') {
    const pos = after
      ? sql.fragment`and (r.started_at, ${PLATFORM}, r.id) < (${after.t}::timestamptz, ${after.s}, ${after.s === PLATFORM ? after.id : '0'}::bigint)`
      : sql.fragment``;
    queries.push(
      db.any(sql.type(CronRow)`
      select 'platform' as source, r.started_at::text as t, r.id::text as id, r.identifier as name, r.task, r.status, r.started_at, r.finished_at,
        (extract(epoch from (r.finished_at - r.started_at)) * 1000)::bigint as duration_ms, null::jsonb as detail
      from scheduled_job_runs r
      where true ${pos} ${filter.status ? sql.fragment`and r.status = ${filter.status}` : sql.fragment``}
      order by r.started_at desc, r.id desc limit ${limit + 1}`),
    );
  }
  if (filter.source !== 'platform') {
    const pos = after
      ? sql.fragment`and (r.created_at, ${TENANT}, r.id::text) < (${after.t}::timestamptz, ${after.s}, ${after.id})`
      : sql.fragment``;
    queries.push(
      db.any(sql.type(CronRow)`
      select 'tenant' as source, r.created_at::text as t, r.id::text as id, r.name, null as task, r.status, r.started_at, r.finished_at, r.duration_ms, r.detail
      from external_cron_runs r
      where r.tenant_id = ${tenantId} ${pos} ${filter.status ? sql.fragment`and r.status = ${filter.status}` : sql.fragment``}
      order by r.created_at desc, r.id desc limit ${limit + 1}`),
    );
  }
  const rows = (await Promise.all(queries)).flat().map((r) => ({
    ...r,
    pos: { t: r.t, s: r.source === 'platform' ? PLATFORM : TENANT, id: r.id, o: 0 } as ActivityPosition,
  }));
  return mergePage(rows, limit, 'desc');
}

const ToolUse = z.object({ tool: z.string(), uses: z.number(), last_used_at: z.string() });
export async function toolUses(
  db: CommonQueryMethods,
  tenantId: string,
): Promise<Map<string, z.infer<typeof ToolUse>>> {
  const rows = await db.any(
    sql.type(ToolUse)`select tool, uses, last_used_at from tool_uses where tenant_id = ${tenantId}`,
  );
  return new Map(rows.map((r) => [r.tool, r]));
}
