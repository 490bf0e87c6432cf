// The console's overview: the queue as Graphile Worker holds it (open jobs
// only: finished ones are deleted, so these reads stay small at any size of
// the jobs table), failures and throughput from the jobs table's indexes,
// and each busy account's place in the fair order.
import { z } from 'zod';
import { sql, type CommonQueryMethods } from '../db/pool.ts';
import { readQueueByKind } from '../queue-metrics.ts';
import { IS_OPEN, JOB_STATE_COUNTS } from './graphile.ts';

const KindRow = z.object({
  kind: z.string(),
  ready: z.number(),
  running: z.number(),
  waiting: z.number(),
  oldest_ready_s: z.number().nullable(),
  failed_1h: z.number(),
  succeeded_10m: z.number(),
});
export type KindRow = z.infer<typeof KindRow> & {
  /** One of the platform's own upkeep tasks (left out of the totals). */
  upkeep: boolean;
};

export type MinuteRow = { minute: string; succeeded: number; failed: number };

const FinishedRow = z.object({ kind: z.string(), minute: z.string(), succeeded: z.number(), failed: z.number() });

const AccountRow = z.object({
  account_id: z.string(),
  owner_email: z.string().nullable(),
  tenants: z.number(),
  weight: z.number().nullable(),
  ready: z.number(),
  running: z.number(),
  waiting: z.number(),
  open_jobs: z.number(),
  max_open_jobs: z.number().nullable(),
  ahead_s: z.number().nullable(),
});
export type AccountRow = z.infer<typeof AccountRow>;

export type Overview = {
  kinds: readonly KindRow[];
  minutes: readonly MinuteRow[];
  accounts: readonly AccountRow[];
  totals: { ready: number; running: number; waiting: number; failed1h: number; oldestReadyS: number | null };
};

export const THROUGHPUT_MINUTES = 10;
const TOP_ACCOUNTS = 20;
/** The finished-jobs counts scan the last minutes of the jobs table: shared for a while by every render. */
const FINISHED_CACHE_MS = 10_000;
const finishedCache = new WeakMap<object, { at: number; rows: Promise<readonly z.infer<typeof FinishedRow>[]> }>();

function finishedRecently(db: CommonQueryMethods) {
  const cached = finishedCache.get(db);
  if (cached && Date.now() - cached.at < FINISHED_CACHE_MS) return cached.rows;
  const rows = db.any(sql.type(FinishedRow)`
    select kind, to_char(date_trunc('minute', finished_at) at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI"Z"') as minute,
      count(*) filter (where status = 'succeeded')::int as succeeded, count(*) filter (where status = 'failed')::int as failed
    from jobs where finished_at >= date_trunc('minute', now()) - make_interval(mins => ${THROUGHPUT_MINUTES - 1})
    group by 1, 2`);
  finishedCache.set(db, { at: Date.now(), rows });
  rows.catch(() => finishedCache.delete(db));
  return rows;
}

/**
 * `upkeep` names the platform's own upkeep tasks (the cron items' tasks): their
 * rows are marked, and left out of the totals, so an idle service reads idle.
 */
export async function readOverview(db: CommonQueryMethods, upkeep: Iterable<string> = []): Promise<Overview> {
  const upkeepKinds = new Set(upkeep);
  const queue = await readQueueByKind(db);
  // Failures are few: the partial index jobs_failed_idx (0041) answers the hour.
  const failed = await db.any(sql.type(z.object({ kind: z.string(), n: z.number() }))`
    select kind, count(*)::int as n from jobs where status = 'failed' and finished_at > now() - interval '1 hour' group by kind`);
  const finished = await finishedRecently(db);
  const kindNames = [
    ...new Set([...queue.map((q) => q.kind), ...failed.map((f) => f.kind), ...finished.map((f) => f.kind)]),
  ].sort();
  const kinds = kindNames.map((kind): KindRow => {
    const q = queue.find((r) => r.kind === kind);
    return {
      kind,
      upkeep: upkeepKinds.has(kind),
      ready: q?.ready ?? 0,
      running: q?.running ?? 0,
      waiting: q?.waiting ?? 0,
      oldest_ready_s: q?.oldest_ready_s ?? null,
      failed_1h: failed.find((f) => f.kind === kind)?.n ?? 0,
      succeeded_10m: finished.filter((f) => f.kind === kind).reduce((n, f) => n + f.succeeded, 0),
    };
  });
  const now = new Date();
  now.setUTCSeconds(0, 0);
  const minutes: MinuteRow[] = [];
  for (let i = THROUGHPUT_MINUTES - 1; i >= 0; i--) {
    const minute = `${new Date(now.getTime() - i * 60_000).toISOString().slice(0, 16)}Z`;
    const rows = finished.filter((f) => f.minute === minute);
    minutes.push({
      minute,
      succeeded: rows.reduce((n, f) => n + f.succeeded, 0),
      failed: rows.reduce((n, f) => n + f.failed, 0),
    });
  }
  const accounts = await db.any(sql.type(AccountRow)`
    with queue as (
      select t.account_id, ${JOB_STATE_COUNTS}
      from jobs j join tenants t on t.id = j.tenant_id where ${IS_OPEN}
      group by t.account_id
      order by count(*) desc limit ${TOP_ACCOUNTS}
    )
    select q.account_id::text, u.email as owner_email,
      (select count(*)::int from tenants t where t.account_id = q.account_id) as tenants,
      l.fair_weight::float8 as weight, q.ready, q.running, q.waiting,
      account_open_count(q.account_id) as open_jobs, l.max_open_jobs,
      (select max(x.n) * 16e-6 / coalesce(l.fair_weight, 1) from (select c.pool, sum(c.open)::float8 as n
         from account_job_counts c where c.account_id = q.account_id group by c.pool) x)::float8 as ahead_s
    from queue q
    left join users u on u.id = q.account_id
    left join lateral (select * from account_limits(q.account_id)) l on true
    order by q.ready + q.running + q.waiting desc, q.account_id`);
  const work = kinds.filter((k) => !k.upkeep);
  const totals = {
    ready: work.reduce((n, k) => n + k.ready, 0),
    running: work.reduce((n, k) => n + k.running, 0),
    waiting: work.reduce((n, k) => n + k.waiting, 0),
    failed1h: kinds.reduce((n, k) => n + k.failed_1h, 0),
    oldestReadyS: work.reduce<number | null>(
      (m, k) => (k.oldest_ready_s === null ? m : Math.max(m ?? 0, k.oldest_ready_s)),
      null,
    ),
  };
  return { kinds, minutes, accounts, totals };
}
