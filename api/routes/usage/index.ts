// Usage of a tenant: ingest and list raw records, summaries, breakdowns,
// spending, the monthly budget and its snapshots, runs of the tenant's own
// cron jobs. Reads need Viewer, writes Admin, in the x-tenant-id tenant or,
// without the header, the caller's workspace (the spec's "Auth" class).
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { LIMITS } from '../../../core/rate-limit.ts';
import { getBudget, setBudget, takeBudgetSnapshot } from '../../../core/usage/budget.ts';
import { recordCronRun } from '../../../core/usage/cron-runs.ts';
import {
  IngestKeyConflictError,
  ingestUsage,
  queryUsage,
  UnknownAgentError,
  UsageCeilingError,
} from '../../../core/usage/records.ts';
import { usageAnalytics, usageSpending, usageSummary } from '../../../core/usage/reports.ts';
import { pageOr400, PlatformError, PlatformHttpError } from '../../errors.ts';
import { OptionalTenantHeaders } from '../../plugins/tenant.ts';
import {
  AnalyticsQuery,
  Budget,
  BudgetBody,
  BudgetSnapshot,
  CronRun,
  CronRunBody,
  IDEMPOTENCY_KEY,
  IngestBody,
  MAX_RANGE_DAYS,
  Period,
  toCronRun,
  toRecord,
  toTotals,
  UsageAnalytics,
  UsagePage,
  UsageQuery,
  UsageRecord,
  UsageSpending,
  UsageSummary,
} from './schemas.ts';

const DAY_MS = 86_400_000;
const dayOf = (ms: number) => new Date(ms).toISOString().slice(0, 10);
const providerOf = (model: string) => {
  const prefix = model.split('/')[0] ?? '';
  return model.includes('/') && /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/.test(prefix) ? prefix : 'external';
};

const usageRoutes: FastifyPluginAsyncZod = async (app) => {
  const viewer = { onRequest: app.requireUser, preValidation: app.requireWorkspace('viewer') };
  const admin = { onRequest: app.requireUser, preValidation: app.requireWorkspace('admin') };
  // Aggregates over up to a year of records: the spec's tracking/analytics
  // limit (30 per minute per IP) keeps one client from monopolising them.
  const analytics = {
    onRequest: [app.rateLimit(LIMITS.tracking), app.requireUser],
    preValidation: app.requireWorkspace('viewer'),
  };
  const errors = { 400: PlatformError, 401: PlatformError, 403: PlatformError, 404: PlatformError };
  const common = { tags: ['usage'], security: [{ PlatformJWT: [] }], headers: OptionalTenantHeaders };

  app.post(
    '/api/usage/ingest',
    {
      ...admin,
      schema: {
        ...common,
        operationId: 'ingestUsage',
        summary: 'Record usage of a model (token counts, cost) from outside the platform',
        description:
          'Optional `Idempotency-Key` (8-200 printable ASCII, no spaces): a retry with the same key and record returns the first record (200, `Idempotency-Replayed: true`); the key with a different record is 409 idempotency_conflict. Ingested usage is capped per tenant and UTC month of occurrence at 10^13 micro-dollars (10,000,000 USD) and 10^13 tokens, so report totals stay exact: past it, 422 usage_ceiling_exceeded and nothing is stored.',
        headers: OptionalTenantHeaders.extend({
          'idempotency-key': z.string().optional().describe('Unique per record; reuse it only to retry'),
        }),
        body: IngestBody,
        response: { 201: UsageRecord, 200: UsageRecord, ...errors, 409: PlatformError, 422: PlatformError },
      },
    },
    async (request, reply) => {
      const key = request.headers['idempotency-key'];
      if (key !== undefined && !IDEMPOTENCY_KEY.test(key)) {
        throw new PlatformHttpError(
          400,
          'invalid_idempotency_key',
          'Idempotency-Key must be 8-200 printable ASCII characters without spaces.',
        );
      }
      const body = request.body;
      try {
        const { record, replayed } = await ingestUsage(app.db, {
          tenantId: request.tenant!.id,
          model: body.model,
          provider: body.provider ?? providerOf(body.model),
          inputTokens: body.inputTokens,
          outputTokens: body.outputTokens,
          costMicros: body.costMicros,
          agentId: body.agentId,
          occurredAt: body.occurredAt,
          ingestKey: key,
        });
        if (replayed) reply.header('idempotency-replayed', 'true');
        return reply.code(replayed ? 200 : 201).send(toRecord(record));
      } catch (error) {
        if (error instanceof UnknownAgentError)
          throw new PlatformHttpError(
            400,
            'unknown_agent',
            'Invalid request: body.agentId: no such agent in this tenant.',
          );
        if (error instanceof IngestKeyConflictError)
          throw new PlatformHttpError(409, 'idempotency_conflict', error.message);
        if (error instanceof UsageCeilingError)
          throw new PlatformHttpError(422, 'usage_ceiling_exceeded', error.message);
        throw error;
      }
    },
  );

  app.get(
    '/api/usage/query',
    {
      ...viewer,
      schema: {
        ...common,
        operationId: 'queryUsage',
        summary: 'Usage records, newest first, filtered by time range, model and agent; keyset-paged',
        querystring: UsageQuery,
        response: { 200: UsagePage, ...errors },
      },
    },
    async (request) => {
      const page = await pageOr400(() => queryUsage(app.db, request.tenant!.id, request.query));
      return { items: page.items.map(toRecord), nextCursor: page.nextCursor };
    },
  );

  app.get(
    '/api/usage/summary',
    {
      ...viewer,
      schema: {
        ...common,
        operationId: 'getUsageSummary',
        summary: 'Totals of the current day, week or month',
        querystring: z.object({ period: Period }),
        response: { 200: UsageSummary, ...errors },
      },
    },
    async (request) => {
      const summary = await usageSummary(app.db, request.tenant!.id, request.query.period);
      return { period: summary.period, from: summary.from, to: summary.to, totals: toTotals(summary.totals) };
    },
  );

  app.get(
    '/api/usage/analytics',
    {
      ...analytics,
      schema: {
        ...common,
        operationId: 'getUsageAnalytics',
        summary: `Usage by model and by agent over a range of days (at most ${MAX_RANGE_DAYS})`,
        querystring: AnalyticsQuery,
        response: { 200: UsageAnalytics, ...errors, 429: PlatformError },
      },
    },
    async (request) => {
      const to = request.query.to ?? dayOf(Date.now());
      const from = request.query.from ?? dayOf(Date.parse(to) - 29 * DAY_MS);
      if (from > to || Date.parse(to) - Date.parse(from) > MAX_RANGE_DAYS * DAY_MS) {
        throw new PlatformHttpError(
          400,
          'invalid_request',
          `Invalid request: query.from: at most ${MAX_RANGE_DAYS} days before to, and not after it.`,
        );
      }
      const a = await usageAnalytics(app.db, request.tenant!.id, { from, to });
      return {
        from: a.from,
        to: a.to,
        totals: toTotals(a.totals),
        byModel: a.byModel.map((g) => ({ model: g.model, provider: g.provider, ...toTotals(g) })),
        byAgent: a.byAgent.map((g) => ({ agentId: g.agent_id, agentName: g.agent_name, ...toTotals(g) })),
      };
    },
  );

  app.get(
    '/api/usage/spending',
    {
      ...analytics,
      schema: {
        ...common,
        operationId: 'getUsageSpending',
        summary: 'Cost per day over the current day, week or month',
        querystring: z.object({ period: Period }),
        response: { 200: UsageSpending, ...errors, 429: PlatformError },
      },
    },
    async (request) => {
      const s = await usageSpending(app.db, request.tenant!.id, request.query.period);
      return {
        period: s.period,
        from: s.from,
        to: s.to,
        totalCostMicros: s.totalCostMicros,
        days: s.days.map((d) => ({ day: d.day, costMicros: d.cost_micros, records: d.records })),
      };
    },
  );

  app.get(
    '/api/usage/budget',
    {
      ...viewer,
      schema: {
        ...common,
        operationId: 'getUsageBudget',
        summary: 'Monthly budget: total limit, used and remaining',
        response: { 200: Budget, ...errors },
      },
    },
    async (request) => {
      const budget = await getBudget(app.db, request.tenant!.id);
      if (!budget) throw new PlatformHttpError(404, 'not_found', 'No such tenant.');
      return budget;
    },
  );

  app.put(
    '/api/usage/budget',
    {
      ...admin,
      schema: {
        ...common,
        operationId: 'setUsageBudget',
        summary: "Set the tenant's monthly limit, or null for the plan's default",
        body: BudgetBody,
        response: { 200: Budget, ...errors },
      },
    },
    async (request) => {
      const budget = await setBudget(app.db, request.tenant!.id, request.user!.userId, request.body.monthlyLimitMicros);
      if (!budget) throw new PlatformHttpError(404, 'not_found', 'No such tenant.');
      return budget;
    },
  );

  app.post(
    '/api/usage/cron-runs',
    {
      ...admin,
      schema: {
        ...common,
        operationId: 'recordCronRun',
        summary: "Record a run of one of the tenant's scheduled jobs",
        body: CronRunBody,
        response: { 201: CronRun, ...errors },
      },
    },
    async (request, reply) => {
      const run = await recordCronRun(app.db, {
        tenantId: request.tenant!.id,
        userId: request.user!.userId,
        ...request.body,
      });
      return reply.code(201).send(toCronRun(run));
    },
  );

  app.post(
    '/api/usage/budget-snapshot',
    {
      ...admin,
      schema: {
        ...common,
        operationId: 'takeBudgetSnapshot',
        summary: 'Record the budget as it is now (point-in-time snapshot)',
        response: { 201: BudgetSnapshot, ...errors },
      },
    },
    async (request, reply) => {
      const snapshot = await takeBudgetSnapshot(app.db, request.tenant!.id, request.user!.userId);
      if (!snapshot) throw new PlatformHttpError(404, 'not_found', 'No such tenant.');
      return reply.code(201).send(snapshot);
    },
  );
};

export default usageRoutes;
