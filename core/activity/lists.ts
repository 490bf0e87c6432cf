// The simpler activity lists of a tenant, newest first, keyset-paged by
// (created_at, id): agents with their last activity and counts, companies
// with their agents (teams), skills with their configuration state.
import { z } from 'zod';
import { sql, type CommonQueryMethods } from '../db/pool.ts';
import { configView } from '../skills/config.ts';
import { SkillRow } from '../skills/skills.ts';
import { decodeActivityCursor, encodeActivityCursor } from './cursor.ts';

function page<T extends { t: string; id: string }>(rows: readonly T[], limit: number) {
  const items = rows.slice(0, limit);
  const last = items.at(-1);
  return {
    items,
    nextCursor: rows.length > limit && last ? encodeActivityCursor({ t: last.t, s: 0, id: last.id, o: 0 }) : null,
  };
}
const before = (cursor: string | undefined, columns: ReturnType<typeof sql.fragment>) => {
  const after = decodeActivityCursor(cursor);
  return after ? sql.fragment`and (${columns}) < (${after.t}::timestamptz, ${after.id}::uuid)` : sql.fragment``;
};

const AgentRow = z.object({
  id: z.string(),
  name: z.string(),
  model: z.string(),
  is_default: z.boolean(),
  created_at: z.string(),
  t: z.string(),
  sessions: z.number(),
  messages: z.number(),
  jobs: z.number(),
  last_activity_at: z.string().nullable(),
});

export async function listActivityAgents(db: CommonQueryMethods, tenantId: string, limit: number, cursor?: string) {
  const rows = await db.any(sql.type(AgentRow)`
    select a.id, a.name, a.model, a.is_default, a.created_at, a.created_at::text as t,
      coalesce(st.sessions, 0) as sessions, coalesce(st.messages, 0) as messages, coalesce(st.jobs, 0) as jobs, st.last_activity_at
    from agents a
    left join lateral (
      select count(*)::int as sessions, sum((select count(*) from chat_messages m where m.session_id = s.id))::int as messages,
        sum((select count(*) from jobs j where j.session_id = s.id))::int as jobs, max(s.updated_at) as last_activity_at
      from chat_sessions s where s.tenant_id = ${tenantId} and s.agent_id = a.id
    ) st on true
    where a.tenant_id = ${tenantId} ${before(cursor, sql.fragment`a.created_at, a.id`)}
    order by a.created_at desc, a.id desc limit ${limit + 1}`);
  return page(rows, limit);
}

/** Agents shown per company in /teams; agentCount has them all. */
export const TEAM_AGENTS_SHOWN = 50;
const TeamRow = z.object({
  id: z.string(),
  name: z.string(),
  description: z.string(),
  created_at: z.string(),
  t: z.string(),
  agent_count: z.number(),
  agents: z.array(
    z.object({ id: z.string(), name: z.string(), role: z.string(), model: z.string(), status: z.string() }),
  ),
});

export async function listActivityTeams(db: CommonQueryMethods, tenantId: string, limit: number, cursor?: string) {
  const rows = await db.any(sql.type(TeamRow)`
    select c.id, c.name, c.description, c.created_at, c.created_at::text as t,
      (select count(*) from company_agents ca where ca.tenant_id = ${tenantId} and ca.company_id = c.id)::int as agent_count,
      coalesce((select jsonb_agg(jsonb_build_object('id', x.id, 'name', x.name, 'role', x.role, 'model', x.model, 'status', x.status) order by x.created_at, x.id)
        from (select * from company_agents ca where ca.tenant_id = ${tenantId} and ca.company_id = c.id
              order by ca.created_at, ca.id limit ${TEAM_AGENTS_SHOWN}) x), '[]'::jsonb) as agents
    from companies c
    where c.tenant_id = ${tenantId} ${before(cursor, sql.fragment`c.created_at, c.id`)}
    order by c.created_at desc, c.id desc limit ${limit + 1}`);
  return page(rows, limit);
}

const ActivitySkillRow = SkillRow.extend({
  t: z.string(),
  config: z
    .object({
      values_json: z.record(z.string(), z.union([z.string(), z.number(), z.boolean()])),
      secrets: z.record(z.string(), z.object({ keyId: z.string(), ciphertext: z.string(), last4: z.string() })),
      updated_at: z.string(),
    })
    .nullable(),
  uses: z.number(),
});

export async function listActivitySkills(db: CommonQueryMethods, tenantId: string, limit: number, cursor?: string) {
  const rows = await db.any(sql.type(ActivitySkillRow)`
    select s.id, s.name, s.description, s.version, s.allowed_tools, s.env_schema, s.published, s.published_at, s.manifest_sha256, s.tree_sha256,
      s.files, s.total_bytes, s.synced_at, s.created_at, s.updated_at, s.created_at::text as t,
      (select jsonb_build_object('values_json', c.values_json, 'secrets', c.secrets, 'updated_at', c.updated_at)
         from skill_configs c where c.tenant_id = s.tenant_id and c.skill_id = s.id) as config,
      coalesce((select u.uses from tool_uses u where u.tenant_id = s.tenant_id and u.tool = 'skill:' || s.name), 0) as uses
    from skills s
    where s.tenant_id = ${tenantId} ${before(cursor, sql.fragment`s.created_at, s.id`)}
    order by s.created_at desc, s.id desc limit ${limit + 1}`);
  const result = page(rows, limit);
  return {
    nextCursor: result.nextCursor,
    items: result.items.map((r) => ({
      skill: r,
      uses: r.uses,
      configuration: configView(
        r.id,
        r.env_schema,
        r.config && { ...r.config, updated_at: new Date(r.config.updated_at).toISOString() },
      ),
    })),
  };
}
