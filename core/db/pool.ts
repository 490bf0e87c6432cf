// The application's slonik pool. Rows are checked against the zod schema given
// with sql.type(...), so a query that returns an unexpected shape fails loudly
// at the edge of the database instead of deep inside a route.
import {
  createPool,
  createTypeParserPreset,
  SchemaValidationError,
  type DatabasePool,
  type DatabaseTransactionConnection,
  type Interceptor,
  type QueryResultRow,
} from 'slonik';
import type { ZodType } from 'zod';

export { sql } from 'slonik';
export type { DatabasePool, DatabaseTransactionConnection, DatabaseConnection, CommonQueryMethods } from 'slonik';

/**
 * What a write that opens its own transaction runs on: the pool, or a
 * transaction it then joins (as a savepoint), so a caller can commit it
 * together with writes of its own.
 */
export type Transactor = DatabasePool | DatabaseTransactionConnection;

const resultParser: Interceptor = {
  name: 'zod-result-parser',
  transformRow(queryContext, query, row) {
    const parser = queryContext.resultParser as unknown as ZodType | undefined;
    if (!parser) return row;
    const parsed = parser.safeParse(row);
    if (!parsed.success) {
      throw new SchemaValidationError(query, row, parsed.error.issues as never);
    }
    return parsed.data as QueryResultRow;
  },
};

// Timestamps leave the database as ISO-8601 strings: JSON-ready and exact.
const isoTimestamp = (value: string) => new Date(value.replace(' ', 'T').replace(/([+-]\d\d)$/, '$1:00')).toISOString();
// int8 (bigint columns, count(*)) as a number: our counters and micro-dollar
// amounts stay far below 2^53, and plain numbers serialise to JSON.
const int8 = (value: string) => {
  const n = Number(value);
  if (!Number.isSafeInteger(n)) throw new RangeError(`int8 value ${value} exceeds the safe integer range`);
  return n;
};
const typeParsers = [
  ...createTypeParserPreset().filter((p) => !['timestamptz', 'timestamp', 'int8'].includes(p.name)),
  { name: 'int8', parse: int8 },
  { name: 'timestamptz', parse: isoTimestamp },
  { name: 'timestamp', parse: (v: string) => isoTimestamp(`${v}+00`) },
];

export type PoolOptions = {
  maximumPoolSize?: number;
  statementTimeoutMs?: number;
  /** Extra slonik interceptors (a test that records every query it runs). */
  interceptors?: Interceptor[];
};

export async function createDatabasePool(connectionUri: string, options: PoolOptions = {}): Promise<DatabasePool> {
  return createPool(connectionUri, {
    interceptors: [resultParser, ...(options.interceptors ?? [])],
    typeParsers,
    maximumPoolSize: options.maximumPoolSize ?? 10,
    captureStackTrace: false,
    statementTimeout: options.statementTimeoutMs ?? 30_000,
    idleInTransactionSessionTimeout: 60_000,
    connectionTimeout: 10_000,
    // slonik's default runs DISCARD ALL on every release: a second round trip
    // per query. We leave no session state behind (locks and settings are
    // transaction-scoped), so releasing as is is safe and much faster.
    resetConnection: async () => undefined,
  });
}
