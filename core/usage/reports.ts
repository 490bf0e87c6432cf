// Usage reports of one tenant: totals of the current period, breakdowns by
// model and by agent over a range of days, and cost per day. All read
// usageLines, so their numbers agree with each other and with the raw records.
import { z } from 'zod';
import { sql, type CommonQueryMethods } from '../db/pool.ts';
import { Count, nilAgent, periodBounds, sums, Totals, usageLines, type DayRange, type Period } from './periods.ts';

/** Breakdowns list at most this many groups, the most expensive first. */
export const MAX_GROUPS = 100;

export async function totalsOver(db: CommonQueryMethods, tenantId: string, range: DayRange): Promise<Totals> {
  return db.one(sql.type(Totals)`select ${sums} from ${usageLines(tenantId, range)} u`);
}

/** Totals of the current day, week or month (UTC). */
export async function usageSummary(db: CommonQueryMethods, tenantId: string, period: Period) {
  const range = await periodBounds(db, period);
  return { period, from: range.from, to: range.to, totals: await totalsOver(db, tenantId, range) };
}

const ModelGroup = Totals.extend({ model: z.string(), provider: z.string() });
const AgentGroup = Totals.extend({ agent_id: z.string().nullable(), agent_name: z.string().nullable() });

export async function usageAnalytics(db: CommonQueryMethods, tenantId: string, range: DayRange) {
  const lines = usageLines(tenantId, range);
  const byModel = await db.any(sql.type(ModelGroup)`
    select u.model, u.provider, ${sums} from ${lines} u
    group by u.model, u.provider
    order by cost_micros desc, records desc, u.model, u.provider
    limit ${MAX_GROUPS}`);
  const byAgent = await db.any(sql.type(AgentGroup)`
    select nullif(g.agent_key, ${nilAgent}) as agent_id, a.name as agent_name,
      g.input_tokens, g.output_tokens, g.cost_micros, g.records
    from (select u.agent_key, ${sums} from ${lines} u group by u.agent_key) g
    left join agents a on a.id = g.agent_key and a.tenant_id = ${tenantId}
    order by g.cost_micros desc, g.records desc, g.agent_key
    limit ${MAX_GROUPS}`);
  return { ...range, totals: await totalsOver(db, tenantId, range), byModel, byAgent };
}

const SpendingDay = z.object({ day: z.string(), cost_micros: Count, records: Count });

/** Cost per day for every day of the current period, days without usage as zero. */
export async function usageSpending(db: CommonQueryMethods, tenantId: string, period: Period) {
  const range = await periodBounds(db, period);
  const days = await db.any(sql.type(SpendingDay)`
    select g.day::date::text as day, coalesce(sum(u.cost_micros), 0)::bigint as cost_micros, coalesce(sum(u.records), 0)::bigint as records
    from generate_series(${range.from}::date, ${range.to}::date, interval '1 day') as g(day)
    left join ${usageLines(tenantId, range)} u on u.day = g.day::date
    group by g.day
    order by g.day`);
  return { period, from: range.from, to: range.to, totalCostMicros: days.reduce((n, d) => n + d.cost_micros, 0), days };
}
