// The console's job list and job page. The list pages newest first by
// (created_at, id) across all tenants (jobs_created_idx, 0041) with the
// filters an operator needs; a job's page gathers its row, its Graphile job
// while it has one, its history and the operator actions taken on it.
import { z } from 'zod';
import { sql, type CommonQueryMethods } from '../db/pool.ts';
import { PLATFORM_JOB_KINDS } from '../jobs/pools.ts';
import { WAKE_UP_OF_JOB } from './graphile.ts';
import { JOB_STATUSES } from '../jobs/schema.ts';

export const JOB_STATE_FILTERS = ['any', 'open', ...JOB_STATUSES] as const;
export type JobStateFilter = (typeof JOB_STATE_FILTERS)[number];

export type JobFilter = {
  state: JobStateFilter;
  kind?: string | undefined;
  tenantId?: string | undefined;
  accountId?: string | undefined;
  /** created_at bounds (ISO). */
  from?: string | undefined;
  to?: string | undefined;
  /** Keyset cursor: the last row of the previous page. */
  before?: { createdAt: string; id: string } | undefined;
};

export const JOB_PAGE_SIZE = 50;

const ListRow = z.object({
  id: z.string(),
  tenant_id: z.string(),
  tenant_name: z.string(),
  kind: z.string(),
  status: z.enum(JOB_STATUSES),
  attempts: z.number(),
  max_attempts: z.number(),
  created_at: z.string(),
  finished_at: z.string().nullable(),
  error_code: z.string().nullable(),
  /** Where the next page starts after this row (created_at as the database wrote it, and id). */
  cursor: z.string(),
});
export type JobListRow = z.infer<typeof ListRow>;

/** The conditions on `jobs j` a filter names (the list's and the bulk actions'). */
export function jobFilterWhere(filter: JobFilter) {
  const where = [sql.fragment`true`];
  if (filter.state === 'open') where.push(sql.fragment`j.status in ('queued', 'running', 'cancelling')`);
  else if (filter.state !== 'any') where.push(sql.fragment`j.status = ${filter.state}`);
  if (filter.kind) where.push(sql.fragment`j.kind = ${filter.kind}`);
  if (filter.tenantId) where.push(sql.fragment`j.tenant_id = ${filter.tenantId}`);
  if (filter.accountId)
    where.push(sql.fragment`j.tenant_id in (select id from tenants where account_id = ${filter.accountId})`);
  if (filter.from) where.push(sql.fragment`j.created_at >= ${filter.from}::timestamptz`);
  if (filter.to) where.push(sql.fragment`j.created_at < ${filter.to}::timestamptz`);
  if (filter.before)
    where.push(
      sql.fragment`(j.created_at, j.id) < (${filter.before.createdAt}::timestamptz, ${filter.before.id}::uuid)`,
    );
  return sql.join(where, sql.fragment` and `);
}

export async function listJobs(
  db: CommonQueryMethods,
  filter: JobFilter,
  limit = JOB_PAGE_SIZE,
): Promise<{ rows: readonly JobListRow[]; more: boolean }> {
  const rows = await db.any(sql.type(ListRow)`
    select j.id, j.tenant_id, t.name as tenant_name, j.kind, j.status, j.attempts, j.max_attempts,
      j.created_at, j.finished_at, j.error ->> 'code' as error_code, j.created_at::text || '|' || j.id as cursor
    from jobs j join tenants t on t.id = j.tenant_id
    where ${jobFilterWhere(filter)}
    order by j.created_at desc, j.id desc
    limit ${limit + 1}`);
  return { rows: rows.slice(0, limit), more: rows.length > limit };
}

/** Every kind of platform job, for the filter's list. */
export function knownKinds(): readonly string[] {
  return [...PLATFORM_JOB_KINDS].sort();
}

const Detail = z.object({
  id: z.string(),
  tenant_id: z.string(),
  tenant_name: z.string(),
  account_id: z.string(),
  kind: z.string(),
  status: z.enum(JOB_STATUSES),
  queue_name: z.string().nullable(),
  session_id: z.string().nullable(),
  attempts: z.number(),
  max_attempts: z.number(),
  progress: z.unknown(),
  result: z.unknown(),
  error: z.unknown(),
  input: z.unknown(),
  locked_by: z.string().nullable(),
  created_at: z.string(),
  started_at: z.string().nullable(),
  finished_at: z.string().nullable(),
  updated_at: z.string(),
  graphile: z
    .object({
      run_at: z.string(),
      locked_by: z.string().nullable(),
      locked_at: z.string().nullable(),
      attempts: z.number(),
      last_error: z.string().nullable(),
      key: z.string().nullable(),
    })
    .nullable(),
  worker: z.object({ hostname: z.string(), pid: z.number(), last_seen_at: z.string() }).nullable(),
});
export type JobDetail = z.infer<typeof Detail>;

const HistoryRow = z.object({ at: z.string(), event: z.string(), attempt: z.number(), error: z.unknown() });
export type HistoryRow = z.infer<typeof HistoryRow>;

export async function jobDetail(
  db: CommonQueryMethods,
  jobId: string,
): Promise<{ job: JobDetail; history: readonly HistoryRow[] } | null> {
  const job = await db.maybeOne(sql.type(Detail)`
    select j.id, j.tenant_id, t.name as tenant_name, t.account_id::text, j.kind, j.status, j.queue_name, j.session_id,
      j.attempts, j.max_attempts, j.progress, j.result, j.error, j.input, j.locked_by,
      j.created_at, j.started_at, j.finished_at, j.updated_at,
      case when g.id is null then null else json_build_object('run_at', g.run_at, 'locked_by', g.locked_by, 'locked_at', g.locked_at,
        'attempts', g.attempts, 'last_error', g.last_error, 'key', g.key) end as graphile,
      (select json_build_object('hostname', h.hostname, 'pid', h.pid, 'last_seen_at', h.last_seen_at)
       from worker_heartbeats h where h.worker_id = coalesce(g.locked_by, j.locked_by)) as worker
    from jobs j join tenants t on t.id = j.tenant_id
    left join lateral ${WAKE_UP_OF_JOB} g on j.status in ('queued', 'running', 'cancelling')
    where j.id = ${jobId}`);
  if (!job) return null;
  // Failures (and operator retries) are in job_history (0041); a chat
  // session's job also has its states in session_job_events (0018).
  const history = await db.any(sql.type(HistoryRow)`
    select at, event, attempt, error from (
      select at, event, attempt, error, id, 1 as src from job_history where job_id = ${jobId}
      union all
      select at, event, attempt, null::jsonb as error, id, 0 as src from session_job_events where job_id = ${jobId}
    ) h order by at, src, id limit 500`);
  return { job, history };
}

// ------------------------------------------------------------ masking

const SECRET_KEY =
  /(secret|token|password|passwd|authorization|api[-_]?key|credential|sealed|private|cookie|signature)/i;
export const MASK = '•••• (masked)';

/** The value with every field whose name sounds secret replaced, at any depth. */
export function maskSecrets(value: unknown, depth = 0): unknown {
  if (depth > 20) return MASK;
  if (Array.isArray(value)) return value.map((v) => maskSecrets(v, depth + 1));
  if (value && typeof value === 'object') {
    return Object.fromEntries(
      Object.entries(value).map(([k, v]) => [k, SECRET_KEY.test(k) && v !== null ? MASK : maskSecrets(v, depth + 1)]),
    );
  }
  return value;
}
