// Shared query pieces of the company area: keyset pages (newest first, by
// the full-precision created_at and id, so rows inserted while a client
// pages never shift or repeat what it sees) and partial updates.
import { z } from 'zod';
import { sql, type CommonQueryMethods } from '../db/pool.ts';
import { decodeCursor, pageOf } from '../paging.ts';

type Fragment = ReturnType<typeof sql.fragment>;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** Refs are row uuids; anything else can never match (and must not reach a ::uuid cast). */
export const isUuid = (value: string) => UUID.test(value);

export type KeysetQuery = {
  table: string;
  columns: Fragment;
  where: Fragment;
  limit: number;
  cursor?: string | undefined;
};

/** One page of `table`; throws InvalidCursorError for a cursor this service did not issue. */
export async function keysetPage<S extends z.ZodObject>(db: CommonQueryMethods, row: S, q: KeysetQuery) {
  const after = q.cursor === undefined ? null : decodeCursor(q.cursor);
  const rows = await db.any(sql.type(row.extend({ cursor_t: z.string() }))`
    select ${q.columns}, created_at::text as cursor_t from ${sql.identifier([q.table])}
    where ${q.where}
      ${after ? sql.fragment`and (created_at, id) < (${after.t}::timestamptz, ${after.id}::uuid)` : sql.fragment``}
    order by created_at desc, id desc limit ${q.limit + 1}`);
  const page = pageOf(rows as Array<z.output<S> & { cursor_t: string; id: string }>, q.limit);
  // cursor_t is paging plumbing, not part of the row.
  return {
    items: page.items.map(({ cursor_t: _t, ...item }) => item as unknown as z.output<S>),
    nextCursor: page.nextCursor,
  };
}

const COLUMN = /^[a-z_]+$/;
const snake = (key: string) => key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

/** `col = value, ...` for the defined fields of a patch, plus updated_at. */
export function setClause(patch: Record<string, string | null | undefined>) {
  const parts = Object.entries(patch)
    .filter(([key, value]) => value !== undefined && COLUMN.test(snake(key)))
    .map(([key, value]) => sql.fragment`${sql.identifier([snake(key)])} = ${value ?? null}`);
  return sql.join([...parts, sql.fragment`updated_at = now()`], sql.fragment`, `);
}
