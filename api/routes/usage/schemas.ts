// Schemas of the usage routes and the mapping of core rows to them. Costs
// are integer micro-dollars; days are UTC dates (YYYY-MM-DD).
import { z } from 'zod';
import { CRON_RUN_STATUSES, type CronRunRow } from '../../../core/usage/cron-runs.ts';
import { MAX_BUDGET_MICROS } from '../../../core/usage/budget.ts';
import { PERIODS, type Totals } from '../../../core/usage/periods.ts';
import type { UsageRecordRow } from '../../../core/usage/records.ts';
import { PageQuery } from '../../../core/paging.ts';

export const MAX_RANGE_DAYS = 366;
const DAY_MS = 86_400_000;
/** Ingested records may be back-dated this far, and lie this far ahead (clock skew). */
export const MAX_BACKDATE_DAYS = 366;
export const MAX_FUTURE_MS = 5 * 60_000;

export const IDEMPOTENCY_KEY = /^[\x21-\x7E]{8,200}$/;

// biome-ignore lint/suspicious/noControlCharactersInRegex: refusing control characters is the point
const SINGLE_LINE = /^[^\x00-\x1F\x7F]*$/;
const singleLine = (max: number) =>
  z.string().trim().min(1).max(max).regex(SINGLE_LINE, 'must be a single line of text');
const Tokens = z.int().min(0).max(1_000_000_000);
const Micros = z.int().min(0).max(MAX_BUDGET_MICROS);
const DateTime = z.iso.datetime({ offset: true });
const Day = z.iso.date();

export const Model = singleLine(200).describe('Model id, e.g. openai/gpt-4o');
const Provider = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/, 'letters, digits, . _ - ; at most 100');

export const Period = z.enum(PERIODS).default('month').describe('The current UTC day, ISO week (from Monday) or month');

export const IngestBody = z.object({
  model: Model,
  provider: Provider.optional().describe('Defaults to the part of model before "/", else "external"'),
  inputTokens: Tokens,
  outputTokens: Tokens,
  costMicros: z.int().min(0).max(1_000_000_000_000).default(0).describe('Cost in micro-dollars'),
  agentId: z.uuid().optional().describe('An agent of the tenant'),
  occurredAt: DateTime.refine(
    (v) => Date.parse(v) >= Date.now() - MAX_BACKDATE_DAYS * DAY_MS,
    `at most ${MAX_BACKDATE_DAYS} days in the past`,
  )
    .refine((v) => Date.parse(v) <= Date.now() + MAX_FUTURE_MS, 'not in the future')
    .optional()
    .describe(`When the usage happened; default now; at most ${MAX_BACKDATE_DAYS} days back and 5 minutes ahead`),
});

const within = (from: string | undefined, to: string | undefined) =>
  from === undefined ||
  to === undefined ||
  (Date.parse(from) <= Date.parse(to) && Date.parse(to) - Date.parse(from) <= MAX_RANGE_DAYS * DAY_MS);
const rangeMessage = `from must not be after to, and the range at most ${MAX_RANGE_DAYS} days`;

export const UsageQuery = PageQuery.extend({
  from: DateTime.optional().describe('occurredAt >= from'),
  to: DateTime.optional().describe('occurredAt < to'),
  model: Model.optional(),
  agentId: z.uuid().optional(),
}).refine((q) => within(q.from, q.to), { message: rangeMessage, path: ['to'] });

export const AnalyticsQuery = z
  .object({
    from: Day.optional().describe('First day; default 29 days before to'),
    to: Day.optional().describe('Last day, included; default today (UTC)'),
  })
  .refine((q) => within(q.from, q.to), { message: rangeMessage, path: ['to'] });

export const BudgetBody = z.object({
  monthlyLimitMicros: Micros.nullable().describe(
    "The tenant's monthly limit in micro-dollars; null returns to the plan's default",
  ),
});

export const CronRunBody = z
  .object({
    name: singleLine(200),
    status: z.enum(CRON_RUN_STATUSES),
    startedAt: DateTime,
    finishedAt: DateTime.optional(),
    durationMs: z
      .int()
      .min(0)
      .max(MAX_RANGE_DAYS * DAY_MS)
      .optional()
      .describe('Default: finishedAt - startedAt'),
    detail: z
      .record(z.string(), z.unknown())
      .default({})
      .refine((v) => JSON.stringify(v).length <= 16_384, 'detail is larger than 16 KiB'),
  })
  .refine((b) => b.finishedAt === undefined || Date.parse(b.finishedAt) >= Date.parse(b.startedAt), {
    message: 'finishedAt must not be before startedAt',
    path: ['finishedAt'],
  })
  .refine(
    (b) =>
      Date.parse(b.startedAt) <= Date.now() + MAX_FUTURE_MS &&
      Date.parse(b.startedAt) >= Date.now() - MAX_RANGE_DAYS * DAY_MS,
    {
      message: `startedAt must lie within the last ${MAX_RANGE_DAYS} days`,
      path: ['startedAt'],
    },
  );

export const UsageTotals = z
  .object({ inputTokens: z.int(), outputTokens: z.int(), totalTokens: z.int(), costMicros: z.int(), records: z.int() })
  .meta({ id: 'UsageTotals' });
export const toTotals = (t: Totals) => ({
  inputTokens: t.input_tokens,
  outputTokens: t.output_tokens,
  totalTokens: t.input_tokens + t.output_tokens,
  costMicros: t.cost_micros,
  records: t.records,
});

export const UsageRecord = z
  .object({
    id: z.uuid(),
    occurredAt: z.iso.datetime(),
    model: z.string(),
    provider: z.string(),
    agentId: z.uuid().nullable(),
    sessionId: z.uuid().nullable(),
    inputTokens: z.int(),
    outputTokens: z.int(),
    costMicros: z.int(),
    credential: z.enum(['tenant_key', 'platform_credits', 'none', 'external']),
    createdAt: z.iso.datetime(),
  })
  .meta({ id: 'UsageRecord' });
export const toRecord = (r: UsageRecordRow) => ({
  id: r.id,
  occurredAt: r.occurred_at,
  model: r.model,
  provider: r.provider,
  agentId: r.agent_id,
  sessionId: r.session_id,
  inputTokens: r.input_tokens,
  outputTokens: r.output_tokens,
  costMicros: r.cost_micros,
  credential: r.credential as z.infer<typeof UsageRecord>['credential'],
  createdAt: r.created_at,
});

export const UsagePage = z
  .object({ items: z.array(UsageRecord), nextCursor: z.string().nullable() })
  .meta({ id: 'UsagePage' });

export const UsageSummary = z
  .object({ period: z.enum(PERIODS), from: Day, to: Day, totals: UsageTotals })
  .meta({ id: 'UsageSummary' });

export const UsageAnalytics = z
  .object({
    from: Day,
    to: Day,
    totals: UsageTotals,
    byModel: z
      .array(UsageTotals.extend({ model: z.string(), provider: z.string() }))
      .describe('At most 100, most expensive first'),
    byAgent: z
      .array(UsageTotals.extend({ agentId: z.uuid().nullable(), agentName: z.string().nullable() }))
      .describe('At most 100; agentId null is usage without an agent'),
  })
  .meta({ id: 'UsageAnalytics' });

export const UsageSpending = z
  .object({
    period: z.enum(PERIODS),
    from: Day,
    to: Day,
    totalCostMicros: z.int(),
    days: z.array(z.object({ day: Day, costMicros: z.int(), records: z.int() })),
  })
  .meta({ id: 'UsageSpending' });

export const Budget = z
  .object({
    plan: z.string(),
    source: z.enum(['tenant', 'plan']).describe("tenant: the tenant's own limit; plan: the plan's default"),
    limitMicros: z.int(),
    usedMicros: z.int(),
    remainingMicros: z.int(),
    periodStart: Day,
    periodEnd: Day,
  })
  .meta({ id: 'UsageBudget' });

export const BudgetSnapshot = Budget.extend({ id: z.uuid(), takenAt: z.iso.datetime() }).meta({
  id: 'UsageBudgetSnapshot',
});

export const CronRun = z
  .object({
    id: z.uuid(),
    name: z.string(),
    status: z.enum(CRON_RUN_STATUSES),
    startedAt: z.iso.datetime(),
    finishedAt: z.iso.datetime().nullable(),
    durationMs: z.int().nullable(),
    detail: z.record(z.string(), z.unknown()),
    createdAt: z.iso.datetime(),
  })
  .meta({ id: 'ExternalCronRun' });
export const toCronRun = (r: CronRunRow) => ({
  id: r.id,
  name: r.name,
  status: r.status,
  startedAt: r.started_at,
  finishedAt: r.finished_at,
  durationMs: r.duration_ms,
  detail: r.detail,
  createdAt: r.created_at,
});
