// Periods (UTC days) and the one source every usage report reads from:
// usage_daily for closed days that no record is queued for, the raw
// usage_records for today and for queued days. Each day comes from exactly
// one side, so reports equal the sum of the raw records before and after
// any rollup.
import { z } from 'zod';
import { sql, type CommonQueryMethods } from '../db/pool.ts';

export const PERIODS = ['day', 'week', 'month'] as const;
export type Period = (typeof PERIODS)[number];

/** usage_daily's key for "no agent". */
export const NIL_AGENT = '00000000-0000-0000-0000-000000000000';
/** The same as SQL text (not a parameter), so GROUP BY can repeat the expression. */
export const nilAgent = sql.fragment`${sql.literalValue(NIL_AGENT)}::uuid`;

/** BigInt sums from PostgreSQL as numbers (micro-dollars and tokens stay far below 2^53). */
export const Count = z.union([z.bigint(), z.number()]).transform(Number);

/** Days are ISO dates (YYYY-MM-DD); `to` is the last day included. */
export type DayRange = { from: string; to: string };

const Bounds = z.object({ today: z.string(), from: z.string(), to: z.string() });

/** The current day, week (ISO, from Monday) or month, in UTC, and today. */
export async function periodBounds(db: CommonQueryMethods, period: Period): Promise<DayRange & { today: string }> {
  return db.one(sql.type(Bounds)`
    with b as (select date_trunc(${period}, usage_day(now())::timestamp)::date as start, usage_day(now()) as today)
    select today::text as today, start::text as "from",
      (start + ${`1 ${period}`}::interval - interval '1 day')::date::text as "to" from b`);
}

/** The UTC day of the database clock. */
export async function today(db: CommonQueryMethods): Promise<string> {
  return db.oneFirst(sql.type(z.object({ today: z.string() }))`select usage_day(now())::text as today`);
}

/**
 * A subquery of usage lines of one tenant over [from, to] with the columns
 * day, model, agent_key, provider, input_tokens, output_tokens, cost_micros,
 * records. Lines are not aggregated: callers group them as they need.
 */
export function usageLines(tenantId: string, range: DayRange) {
  const from = sql.fragment`${range.from}::date`;
  const to = sql.fragment`${range.to}::date`;
  const today = sql.fragment`usage_day(now())`;
  const startOf = (day: ReturnType<typeof sql.fragment>) => sql.fragment`((${day})::timestamp at time zone 'UTC')`;
  return sql.fragment`(
    with pending as (
      select distinct day from usage_rollup_queue
      where tenant_id = ${tenantId} and day between ${from} and ${to} and day < ${today})
    select d.day, d.model, d.agent_key, d.provider, d.input_tokens, d.output_tokens, d.cost_micros, d.records::bigint as records
    from usage_daily d
    where d.tenant_id = ${tenantId} and d.day between ${from} and ${to} and d.day < ${today}
      and d.day not in (select day from pending)
    union all
    select usage_day(r.occurred_at), r.model, coalesce(r.agent_id, ${nilAgent}), r.provider,
      r.input_tokens::bigint, r.output_tokens::bigint, r.cost_micros, 1::bigint
    from usage_records r
    where r.tenant_id = ${tenantId}
      and r.occurred_at >= greatest(${startOf(from)}, ${startOf(today)})
      and r.occurred_at < ${startOf(sql.fragment`${to} + 1`)}
    union all
    select p.day, r.model, coalesce(r.agent_id, ${nilAgent}), r.provider,
      r.input_tokens::bigint, r.output_tokens::bigint, r.cost_micros, 1::bigint
    from pending p
    join usage_records r on r.tenant_id = ${tenantId}
      and r.occurred_at >= ${startOf(sql.fragment`p.day`)} and r.occurred_at < ${startOf(sql.fragment`p.day + 1`)}
  )`;
}

export const Totals = z.object({
  input_tokens: Count,
  output_tokens: Count,
  cost_micros: Count,
  records: Count,
});
export type Totals = z.infer<typeof Totals>;

/** Column list that sums usage lines (alias u) into Totals. */
export const sums = sql.fragment`
  coalesce(sum(u.input_tokens), 0)::bigint as input_tokens,
  coalesce(sum(u.output_tokens), 0)::bigint as output_tokens,
  coalesce(sum(u.cost_micros), 0)::bigint as cost_micros,
  coalesce(sum(u.records), 0)::bigint as records`;
