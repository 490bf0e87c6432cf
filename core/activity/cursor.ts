// Cursors of the activity lists. Several lists merge two sources (messages
// and job events, memory files and attachments, platform and tenant cron
// runs), so a position is (t, source, id, ordinal): the row's timestamp at
// full precision, which source, its id (text), and an ordinal inside the row.
import { z } from 'zod';

const Position = z.object({
  t: z.string().regex(/^\d{4}-\d\d-\d\d[ T][\d:.]+([+-]\d\d(:?\d\d)?|Z)$/),
  s: z.int().min(0).max(9),
  id: z.string().regex(/^[0-9a-f-]{1,40}$/),
  o: z.int().min(0).max(1_000_000).default(0),
});
export type ActivityPosition = z.infer<typeof Position>;

export class InvalidActivityCursorError extends Error {
  override name = 'InvalidActivityCursorError';
}

export const encodeActivityCursor = (p: ActivityPosition) => Buffer.from(JSON.stringify(p)).toString('base64url');

export function decodeActivityCursor(cursor: string | undefined): ActivityPosition | null {
  if (cursor === undefined) return null;
  try {
    return Position.parse(JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')));
  } catch {
    throw new InvalidActivityCursorError('cursor is not one this list issued');
  }
}

/** Sorts merged rows (ascending or descending by t, s, id, o) and cuts a page with its next cursor. */
export function mergePage<T extends { pos: ActivityPosition }>(rows: T[], limit: number, order: 'asc' | 'desc') {
  const cmp = (a: ActivityPosition, b: ActivityPosition) => {
    const ta = Date.parse(a.t.replace(' ', 'T').replace(/([+-]\d\d)$/, '$1:00'));
    const tb = Date.parse(b.t.replace(' ', 'T').replace(/([+-]\d\d)$/, '$1:00'));
    // Microseconds decide within a millisecond: compare the fraction as text of equal length.
    const fa = (/\.(\d+)/.exec(a.t)?.[1] ?? '').padEnd(6, '0');
    const fb = (/\.(\d+)/.exec(b.t)?.[1] ?? '').padEnd(6, '0');
    return ta - tb || (fa < fb ? -1 : fa > fb ? 1 : 0) || a.s - b.s || idCmp(a.id, b.id) || a.o - b.o;
  };
  const sorted = rows.sort((a, b) => (order === 'asc' ? cmp(a.pos, b.pos) : cmp(b.pos, a.pos)));
  const items = sorted.slice(0, limit);
  const last = items.at(-1);
  return { items, nextCursor: sorted.length > limit && last ? encodeActivityCursor(last.pos) : null };
}

/** Numeric ids (bigint) compare as numbers, uuids as text (PostgreSQL's order for lowercase hex). */
function idCmp(a: string, b: string): number {
  if (/^\d+$/.test(a) && /^\d+$/.test(b)) return a.length - b.length || (a < b ? -1 : a > b ? 1 : 0);
  return a < b ? -1 : a > b ? 1 : 0;
}
