// The console's overview: the queue as Graphile Worker holds it (open jobs
// only: finished ones are deleted, so these reads stay small at any size of
// the jobs table), failures and throughput from the jobs table's indexes,
// and each busy account's place in the fair order.
import { z } from 'zod';
import { sql, type CommonQueryMethods } from '../db/pool.ts';
import { GRAPHILE_JOBS } from './graphile.ts';

/** Graphile's lock holder of a job that waits parked (core/jobs/park.ts): waiting, not running. */
const PARKED = 'platform:parked';

const KindRow = z.object({
  kind: z.string(),
  ready: z.number(),
  running: z.number(),
  waiting: z.number(),
  oldest_ready_s: z.number().nullable(),
  failed_1h: z.number(),
  succeeded_1h: z.number(),
});
export type KindRow = z.infer<typeof KindRow>;

const MinuteRow = z.object({ minute: z.string(), succeeded: z.number(), failed: z.number() });
export type MinuteRow = z.infer<typeof MinuteRow>;

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

export async function readOverview(db: CommonQueryMethods): Promise<Overview> {
  const kinds = await db.any(sql.type(KindRow)`
    with queue as (
      select task_identifier as kind,
        count(*) filter (where locked_at is null and run_at <= now() and attempts < max_attempts)::int as ready,
        count(*) filter (where locked_at is not null and locked_by is distinct from ${PARKED})::int as running,
        count(*) filter (where (locked_at is null and run_at > now()) or locked_by = ${PARKED})::int as waiting,
        extract(epoch from now() - min(run_at) filter (where locked_at is null and run_at <= now() and attempts < max_attempts))::float8 as oldest_ready_s
      from ${GRAPHILE_JOBS} group by task_identifier
    ), finished as (
      select kind, count(*) filter (where status = 'failed')::int as failed_1h, count(*) filter (where status = 'succeeded')::int as succeeded_1h
      from jobs where finished_at > now() - interval '1 hour' group by kind
    )
    select coalesce(q.kind, f.kind) as kind, coalesce(q.ready, 0) as ready, coalesce(q.running, 0) as running,
      coalesce(q.waiting, 0) as waiting, q.oldest_ready_s, coalesce(f.failed_1h, 0) as failed_1h, coalesce(f.succeeded_1h, 0) as succeeded_1h
    from queue q full join finished f on f.kind = q.kind
    order by 1`);
  const minutes = await db.any(sql.type(MinuteRow)`
    select to_char(m.minute at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI"Z"') as minute,
      count(j.*) filter (where j.status = 'succeeded')::int as succeeded,
      count(j.*) filter (where j.status = 'failed')::int as failed
    from generate_series(date_trunc('minute', now()) - make_interval(mins => ${THROUGHPUT_MINUTES - 1}), date_trunc('minute', now()), interval '1 minute') as m(minute)
    left join jobs j on j.finished_at >= m.minute and j.finished_at < m.minute + interval '1 minute'
      and j.finished_at >= date_trunc('minute', now()) - make_interval(mins => ${THROUGHPUT_MINUTES - 1})
    group by m.minute order by m.minute`);
  const accounts = await db.any(sql.type(AccountRow)`
    with queue as (
      select t.account_id,
        count(*) filter (where g.locked_at is null and g.run_at <= now())::int as ready,
        count(*) filter (where g.locked_at is not null and g.locked_by is distinct from ${PARKED})::int as running,
        count(*) filter (where (g.locked_at is null and g.run_at > now()) or g.locked_by = ${PARKED})::int as waiting
      from ${GRAPHILE_JOBS} g join tenants t on t.id = (g.payload ->> 'tenantId')::uuid
      where g.payload ->> 'tenantId' ~ '^[0-9a-f-]{36}$'
      group by t.account_id
      order by count(*) desc limit ${TOP_ACCOUNTS}
    )
    select q.account_id::text, u.email as owner_email,
      (select count(*)::int from tenants t where t.account_id = q.account_id) as tenants,
      l.fair_weight::float8 as weight, q.ready, q.running, q.waiting,
      account_open_count(q.account_id) as open_jobs, l.max_open_jobs,
      (select extract(epoch from max(a.vtime - c.vtime))::float8 from fair_accounts a join fair_clock c on c.pool = a.pool
       where a.account_id = q.account_id) as ahead_s
    from queue q
    left join users u on u.id = q.account_id
    left join lateral (select * from account_limits(q.account_id)) l on true
    order by q.ready + q.running + q.waiting desc, q.account_id`);
  const totals = {
    ready: kinds.reduce((n, k) => n + k.ready, 0),
    running: kinds.reduce((n, k) => n + k.running, 0),
    waiting: kinds.reduce((n, k) => n + k.waiting, 0),
    failed1h: kinds.reduce((n, k) => n + k.failed_1h, 0),
    oldestReadyS: kinds.reduce<number | null>((m, k) => (k.oldest_ready_s === null ? m : Math.max(m ?? 0, k.oldest_ready_s)), null),
  };
  return { kinds, minutes, accounts, totals };
}
