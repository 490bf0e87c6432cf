// Raw usage records: a client's ingest (credential 'external') and the
// filtered, keyset-paged list, newest first. Chat turns write their own
// records; both kinds are listed alike.
import { z } from 'zod';
import { sql, type CommonQueryMethods } from '../db/pool.ts';
import { decodeCursor, encodeCursor } from '../paging.ts';
import { Count } from './periods.ts';

export const UsageRecordRow = z.object({
  id: z.string(),
  tenant_id: z.string(),
  agent_id: z.string().nullable(),
  session_id: z.string().nullable(),
  provider: z.string(),
  model: z.string(),
  input_tokens: z.number(),
  output_tokens: z.number(),
  cost_micros: Count,
  credential: z.string(),
  ingest_key: z.string().nullable(),
  occurred_at: z.string(),
  created_at: z.string(),
  // occurred_at to the microsecond: a cursor cut to milliseconds would skip
  // records that share the millisecond.
  position: z.string(),
});
export type UsageRecordRow = z.infer<typeof UsageRecordRow>;
const recordRow = sql.type(UsageRecordRow);
const columns = sql.fragment`
  id, tenant_id, agent_id, session_id, provider, model, input_tokens, output_tokens, cost_micros, credential,
  ingest_key, occurred_at, created_at, to_char(occurred_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as position`;

export type IngestInput = {
  tenantId: string;
  model: string;
  provider: string;
  inputTokens: number;
  outputTokens: number;
  costMicros: number;
  agentId?: string | undefined;
  occurredAt?: string | undefined;
  ingestKey?: string | undefined;
};

export class UnknownAgentError extends Error {
  override name = 'UnknownAgentError';
}

/**
 * Ingested cost and tokens per tenant and UTC month of occurrence. With
 * 13 months in a 366-day report these keep every total far below 2^53
 * (exact JSON numbers), whatever a client posts.
 */
export const INGEST_MONTHLY_CEILING = { costMicros: 10_000_000_000_000, tokens: 10_000_000_000_000 };

/** The record would take the tenant's ingested usage of that month past the ceiling. */
export class UsageCeilingError extends Error {
  override name = 'UsageCeilingError';
}

/** The ingest key was used before for a different record. */
export class IngestKeyConflictError extends Error {
  override name = 'IngestKeyConflictError';
}

const sameRecord = (row: UsageRecordRow, input: IngestInput) =>
  row.model === input.model &&
  row.provider === input.provider &&
  row.input_tokens === input.inputTokens &&
  row.output_tokens === input.outputTokens &&
  row.cost_micros === input.costMicros &&
  row.agent_id === (input.agentId ?? null) &&
  (input.occurredAt === undefined || Date.parse(row.occurred_at) === Date.parse(input.occurredAt));

/** Writes one record; a repeated ingest key returns the first record (replayed: true). */
export async function ingestUsage(
  db: CommonQueryMethods,
  input: IngestInput,
): Promise<{ record: UsageRecordRow; replayed: boolean }> {
  if (input.agentId) {
    const known = await db.exists(
      sql.unsafe`select 1 from agents where id = ${input.agentId} and tenant_id = ${input.tenantId}`,
    );
    if (!known) throw new UnknownAgentError('No such agent in this tenant.');
  }
  const inserted = await db.transaction(async (tx) => {
    const record = await tx.maybeOne(recordRow`
      insert into usage_records (tenant_id, agent_id, provider, model, input_tokens, output_tokens, cost_micros, credential, occurred_at, ingest_key)
      values (${input.tenantId}, ${input.agentId ?? null}, ${input.provider}, ${input.model}, ${input.inputTokens}, ${input.outputTokens},
        ${input.costMicros}, 'external', coalesce(${input.occurredAt ?? null}::timestamptz, now()), ${input.ingestKey ?? null})
      on conflict (tenant_id, ingest_key) where ingest_key is not null do nothing
      returning ${columns}`);
    if (!record) return null; // a replay: counted the first time
    const tokens = input.inputTokens + input.outputTokens;
    const counted = await tx.maybeOne(sql.unsafe`
      insert into usage_ingest_months as m (tenant_id, month, cost_micros, tokens)
      select ${input.tenantId}, date_trunc('month', ${record.occurred_at}::timestamptz at time zone 'UTC')::date, ${input.costMicros}, ${tokens}
      where ${input.costMicros}::bigint <= ${INGEST_MONTHLY_CEILING.costMicros}::bigint and ${tokens}::bigint <= ${INGEST_MONTHLY_CEILING.tokens}::bigint
      on conflict (tenant_id, month) do update set cost_micros = m.cost_micros + excluded.cost_micros, tokens = m.tokens + excluded.tokens
        where m.cost_micros + excluded.cost_micros <= ${INGEST_MONTHLY_CEILING.costMicros}
          and m.tokens + excluded.tokens <= ${INGEST_MONTHLY_CEILING.tokens}
      returning 1 as counted`);
    if (!counted)
      throw new UsageCeilingError(
        "This record would take the month's ingested usage past the ceiling of 10,000,000 USD (10^13 micro-dollars) or 10^13 tokens.",
      );
    return record;
  });
  if (inserted) return { record: inserted, replayed: false };
  const existing = await db.one(recordRow`
    select ${columns} from usage_records where tenant_id = ${input.tenantId} and ingest_key = ${input.ingestKey ?? null}`);
  if (!sameRecord(existing, input))
    throw new IngestKeyConflictError('This ingest key was already used for a different record.');
  return { record: existing, replayed: true };
}

export type UsageFilters = {
  /** Inclusive lower bound of occurred_at. */
  from?: string | undefined;
  /** Exclusive upper bound of occurred_at. */
  to?: string | undefined;
  model?: string | undefined;
  agentId?: string | undefined;
  limit: number;
  cursor?: string | undefined;
};

/** Records of one tenant, newest first by (occurred_at, id); throws InvalidCursorError. */
export async function queryUsage(db: CommonQueryMethods, tenantId: string, filters: UsageFilters) {
  const after = filters.cursor ? decodeCursor(filters.cursor) : null;
  const where = [
    sql.fragment`tenant_id = ${tenantId}`,
    ...(filters.from ? [sql.fragment`occurred_at >= ${filters.from}::timestamptz`] : []),
    ...(filters.to ? [sql.fragment`occurred_at < ${filters.to}::timestamptz`] : []),
    ...(filters.model ? [sql.fragment`model = ${filters.model}`] : []),
    ...(filters.agentId ? [sql.fragment`agent_id = ${filters.agentId}`] : []),
    ...(after ? [sql.fragment`(occurred_at, id) < (${after.t}::timestamptz, ${after.id}::uuid)`] : []),
  ];
  const rows = await db.any(recordRow`
    select ${columns} from usage_records
    where ${sql.join(where, sql.fragment` and `)}
    order by occurred_at desc, id desc
    limit ${filters.limit + 1}`);
  const items = rows.slice(0, filters.limit);
  const last = items.at(-1);
  return {
    items,
    nextCursor: rows.length > filters.limit && last ? encodeCursor({ t: last.position, id: last.id }) : null,
  };
}
