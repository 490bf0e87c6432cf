// Rollup of usage_records into usage_daily. A day is recomputed whole (its
// rows deleted and summed again from the raw records) in one transaction, so
// running it twice, or retrying a run that failed half-way, gives the same
// rows. Requested days (default: yesterday and today) are recomputed for all
// tenants; any other day a record was queued for (a late or back-dated
// record) only for the tenants queued.
import { z } from 'zod';
import { sql, type DatabasePool, type DatabaseTransactionConnection } from '../db/pool.ts';
import { Count, nilAgent } from './periods.ts';

// Advisory lock class of the rollup; the second key is the day, so rollups
// of one day queue behind each other and different days run freely.
const ROLLUP_LOCK = 73_015_520;
/** Queued days beyond this wait for the next run, so one run stays short. */
const MAX_QUEUED_DAYS_PER_RUN = 400;

export type DayRollup = {
  day: string;
  scope: 'all' | 'queued';
  tenants: number | null;
  rows: number;
  dequeued: number;
};

const Today = z.object({ today: z.string(), yesterday: z.string() });
const QueuedDay = z.object({ day: z.string() });
const Queued = z.object({ id: z.string(), tenant_id: z.string() });

/** Recomputes usage_daily for the given days (ISO dates) and for queued days. */
export async function rollup(db: DatabasePool, options: { days?: string[] } = {}): Promise<{ days: DayRollup[] }> {
  let requested = options.days;
  if (!requested) {
    const now = await db.one(
      sql.type(Today)`select usage_day(now())::text as today, (usage_day(now()) - 1)::text as yesterday`,
    );
    requested = [now.yesterday, now.today];
  }
  const full = [...new Set(requested)].sort();
  const queued = await db.anyFirst(sql.type(QueuedDay)`
    select distinct day::text as day from usage_rollup_queue
    where day <> all(${sql.array(full, 'date')})
    order by day limit ${MAX_QUEUED_DAYS_PER_RUN}`);
  const results: DayRollup[] = [];
  for (const day of full) results.push(await db.transaction((tx) => rollupDay(tx, day, true)));
  for (const day of queued) results.push(await db.transaction((tx) => rollupDay(tx, day, false)));
  return { days: results };
}

async function rollupDay(tx: DatabaseTransactionConnection, day: string, allTenants: boolean): Promise<DayRollup> {
  await tx.query(sql.unsafe`select pg_advisory_xact_lock(${ROLLUP_LOCK}, (${day}::date - date '2000-01-01'))`);
  // The queue rows seen now are the ones deleted at the end: their records
  // are committed, so the recompute below (a later snapshot) includes them.
  // Rows committed meanwhile stay queued for the next run.
  const seen = await tx.any(sql.type(Queued)`
    select id::text as id, tenant_id from usage_rollup_queue where day = ${day}::date`);
  const tenants = [...new Set(seen.map((r) => r.tenant_id))];
  if (!allTenants && tenants.length === 0) return { day, scope: 'queued', tenants: 0, rows: 0, dequeued: 0 };
  const only = allTenants ? sql.fragment`true` : sql.fragment`tenant_id = any(${sql.array(tenants, 'uuid')})`;
  await tx.query(sql.unsafe`delete from usage_daily where day = ${day}::date and ${only}`);
  const rows = await tx.oneFirst(sql.type(z.object({ n: Count }))`
    with inserted as (
      insert into usage_daily (tenant_id, day, model, agent_key, provider, input_tokens, output_tokens, cost_micros, records)
      select tenant_id, ${day}::date, model, coalesce(agent_id, ${nilAgent}), provider,
        sum(input_tokens)::bigint, sum(output_tokens)::bigint, sum(cost_micros)::bigint, count(*)::int
      from usage_records
      where occurred_at >= (${day}::date::timestamp at time zone 'UTC')
        and occurred_at < ((${day}::date + 1)::timestamp at time zone 'UTC')
        and ${only}
      group by tenant_id, model, coalesce(agent_id, ${nilAgent}), provider
      returning 1)
    select count(*) as n from inserted`);
  const { rowCount } = await tx.query(sql.unsafe`
    delete from usage_rollup_queue where id = any(${sql.array(
      seen.map((r) => r.id),
      'int8',
    )})`);
  return {
    day,
    scope: allTenants ? 'all' : 'queued',
    tenants: allTenants ? null : tenants.length,
    rows,
    dequeued: rowCount,
  };
}
