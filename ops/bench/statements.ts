// BENCH_STATEMENTS=1: where the database time of each bench section goes.
// The embedded PostgreSQL then loads pg_stat_statements; after a section the
// bench prints its most expensive statements (calls, total and mean time,
// WAL written) and resets the counters for the next section.
import { z } from 'zod';
import { sql, type DatabasePool } from '../../core/db/pool.ts';

export const statementsWanted = process.env.BENCH_STATEMENTS === '1';
export const statementSettings: Record<string, string> = statementsWanted
  ? { shared_preload_libraries: 'pg_stat_statements', 'pg_stat_statements.track': 'all' }
  : {};

const Row = z.object({
  calls: z.number(),
  total_ms: z.number(),
  mean_ms: z.number(),
  wal_kb: z.number(),
  query: z.string(),
});

export async function startStatements(db: DatabasePool): Promise<void> {
  if (!statementsWanted) return;
  await db.query(sql.unsafe`create extension if not exists pg_stat_statements`);
  await db.query(sql.unsafe`select pg_stat_statements_reset()`);
}

export async function printStatements(db: DatabasePool, section: string, limit = 15): Promise<void> {
  if (!statementsWanted) return;
  const rows = await db.any(sql.type(Row)`
    select calls::float8 as calls, total_exec_time as total_ms, mean_exec_time as mean_ms, (wal_bytes / 1024)::float8 as wal_kb,
      regexp_replace(query, '\\s+', ' ', 'g') as query
    from pg_stat_statements
    where query not ilike '%pg_stat_statements%'
    order by total_exec_time desc limit ${limit}`);
  if (rows.length === 0) return; // the section did not run
  process.stderr.write(`\n  statements of section ${section} (pg_stat_statements, by total time):\n`);
  for (const r of rows) {
    process.stderr.write(
      `  ${String(r.calls).padStart(8)} calls ${r.total_ms.toFixed(0).padStart(7)} ms ${r.mean_ms.toFixed(3).padStart(8)} ms/call ${r.wal_kb.toFixed(0).padStart(7)} kB WAL  ${r.query.slice(0, 160)}\n`,
    );
  }
  await db.query(sql.unsafe`select pg_stat_statements_reset()`);
}
