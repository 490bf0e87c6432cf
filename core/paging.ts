// Keyset paging: a page is "rows after this (created_at, id)", so rows
// inserted while a client pages never shift or repeat what it sees. The
// cursor is opaque to clients (base64url JSON) and checked on the way in.
import { z } from 'zod';

// t is the row's timestamp at full (microsecond) precision, as PostgreSQL
// prints it: a millisecond cursor would skip rows within the same millisecond.
const TIMESTAMP = /^(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:\.\d{1,6})?(?:([+-])(\d\d)(?::?(\d\d))?|Z)$/;

/**
 * A real calendar instant, checked here: the value goes into a ::timestamptz
 * cast, and a crafted one (month 13, year 0000, 25:00) must be a 400, not a
 * database error.
 */
function isTimestamp(value: string): boolean {
  const m = TIMESTAMP.exec(value);
  if (!m) return false;
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  const [offsetHours, offsetMinutes] = [Number(m[8] ?? 0), Number(m[9] ?? 0)];
  if (year < 1 || hour > 23 || minute > 59 || second > 59 || offsetHours > 15 || offsetMinutes > 59) return false;
  const date = new Date(Date.UTC(year, month - 1, day));
  date.setUTCFullYear(year); // Date.UTC maps years 0-99 to 1900-1999
  return date.getUTCFullYear() === year && date.getUTCMonth() === month - 1 && date.getUTCDate() === day;
}

const Position = z.object({ t: z.string().max(40).refine(isTimestamp), id: z.uuid() });
export type Position = z.infer<typeof Position>;

export function encodeCursor(position: Position): string {
  return Buffer.from(JSON.stringify(position)).toString('base64url');
}

export class InvalidCursorError extends Error {
  override name = 'InvalidCursorError';
}

export function decodeCursor(cursor: string): Position {
  try {
    return Position.parse(JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')));
  } catch {
    throw new InvalidCursorError('cursor is not one this service issued');
  }
}

/** Query schema fragment for list routes. */
export const PageQuery = z.object({
  limit: z.coerce.number().int().min(1).max(100).default(20).describe('Page size, 1-100'),
  cursor: z.string().min(1).max(500).optional().describe('Opaque cursor from the previous page'),
});

/**
 * Given limit+1 rows, the page and the cursor of the next one (or null).
 * Rows carry `cursor_t`: `created_at::text` selected beside the row.
 */
export function pageOf<T extends { cursor_t: string; id: string }>(rows: readonly T[], limit: number) {
  const items = rows.slice(0, limit);
  const last = items.at(-1);
  return { items, nextCursor: rows.length > limit && last ? encodeCursor({ t: last.cursor_t, id: last.id }) : null };
}
