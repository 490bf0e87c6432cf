// Tenants for the console: plan, this month's messages, suspension, and the
// work they have in the queue (Graphile's open jobs, by the payload's tenant).
import { z } from 'zod';
import { sql, type CommonQueryMethods } from '../db/pool.ts';
import { JOB_STATE_COUNTS } from './graphile.ts';

const TenantRow = z.object({
  id: z.string(),
  name: z.string(),
  plan: z.string(),
  plan_status: z.string(),
  account_id: z.string(),
  owner_email: z.string().nullable(),
  created_at: z.string(),
  suspended_at: z.string().nullable(),
  suspended_reason: z.string().nullable(),
  messages_this_month: z.number(),
  ready: z.number(),
  running: z.number(),
  waiting: z.number(),
  cursor: z.string(),
});
export type ConsoleTenant = z.infer<typeof TenantRow>;

export const TENANT_PAGE_SIZE = 50;

const columns = sql.fragment`
  t.id, t.name, t.plan, t.plan_status, t.account_id::text, u.email as owner_email, t.created_at, t.suspended_at, t.suspended_reason,
  coalesce((select c.messages from tenant_message_counts c where c.tenant_id = t.id and c.month = date_trunc('month', now())::date), 0) as messages_this_month,
  coalesce(q.ready, 0) as ready, coalesce(q.running, 0) as running, coalesce(q.waiting, 0) as waiting, t.created_at::text || '|' || t.id as cursor`;

/** The given tenants with their work in the queue: one pass over their open jobs for the whole page. */
const withQueue = (page: ReturnType<typeof sql.fragment>) => sql.fragment`
  with page as (${page}),
  queue as (
    select j.tenant_id::text as tenant_id, ${JOB_STATE_COUNTS}
    from jobs j where j.tenant_id = any(array(select id from page)) and j.status in ('queued', 'running', 'cancelling')
    group by 1
  )
  select ${columns} from page t left join users u on u.id = t.owner_id left join queue q on q.tenant_id = t.id::text
  order by t.created_at desc, t.id desc`;

export type TenantFilter = {
  search?: string | undefined;
  suspended?: boolean | undefined;
  before?: { createdAt: string; id: string } | undefined;
};

export async function listTenants(
  db: CommonQueryMethods,
  filter: TenantFilter,
  limit = TENANT_PAGE_SIZE,
): Promise<{ rows: readonly ConsoleTenant[]; more: boolean }> {
  const where = [sql.fragment`true`];
  if (filter.search) {
    const like = `%${filter.search.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
    where.push(sql.fragment`(t.name ilike ${like} or t.id::text = ${filter.search} or u.email ilike ${like})`);
  }
  if (filter.suspended) where.push(sql.fragment`t.suspended_at is not null`);
  if (filter.before)
    where.push(
      sql.fragment`(t.created_at, t.id) < (${filter.before.createdAt}::timestamptz, ${filter.before.id}::uuid)`,
    );
  const rows = await db.any(
    sql.type(TenantRow)`${withQueue(sql.fragment`
    select t.* from tenants t left join users u on u.id = t.owner_id
    where ${sql.join(where, sql.fragment` and `)}
    order by t.created_at desc, t.id desc limit ${limit + 1}`)}`,
  );
  return { rows: rows.slice(0, limit), more: rows.length > limit };
}

export async function consoleTenant(db: CommonQueryMethods, tenantId: string): Promise<ConsoleTenant | null> {
  return db.maybeOne(sql.type(TenantRow)`${withQueue(sql.fragment`select * from tenants where id = ${tenantId}`)}`);
}
