// Where a value is kept at rest: every row of every table of the database
// (ours and Graphile Worker's), as text, searched for the value. For tests
// that a secret is stored only hashed or sealed.
import { z } from 'zod';
import { sql, type DatabasePool } from '../../core/db/pool.ts';

/** The tables (schema.table) holding `needle` anywhere in a row. */
export async function tablesHolding(db: DatabasePool, needle: string): Promise<string[]> {
  const tables = await db.any(sql.type(z.object({ schema: z.string(), name: z.string() }))`
    select table_schema as schema, table_name as name from information_schema.tables
    where table_type = 'BASE TABLE' and table_schema not in ('pg_catalog', 'information_schema')`);
  const found: string[] = [];
  for (const { schema, name } of tables) {
    const hit = await db.exists(
      sql.unsafe`select 1 from ${sql.identifier([schema, name])} t where strpos(t::text, ${needle}) > 0`,
    );
    if (hit) found.push(`${schema}.${name}`);
  }
  return found;
}
