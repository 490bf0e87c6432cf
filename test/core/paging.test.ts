// Keyset cursors: what this service issued decodes; anything else, including
// well-formed JSON with an impossible instant, is an InvalidCursorError (a
// 400 at the routes), never a value that reaches ::timestamptz.
import t from 'tap';
import { decodeCursor, encodeCursor, InvalidCursorError } from '../../core/paging.ts';

const id = '5f0c6a38-4b7e-4d52-9a43-0d5c2b7c1e11';
const raw = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');

t.test('cursors as PostgreSQL prints timestamps decode', async (t) => {
  for (const ts of [
    '2026-11-23 12:00:00.123456+00',
    '2026-11-23 12:00:00+05:30',
    '2024-02-29 23:59:59.5-08',
    '2026-11-23T12:00:00Z',
    '0001-01-01 00:00:00+00',
  ]) {
    t.same(decodeCursor(encodeCursor({ t: ts, id })), { t: ts, id }, ts);
  }
});

t.test('impossible instants and foreign shapes are refused', async (t) => {
  const bad = [
    '2024-13-01 00:00:00+00',
    '0000-01-01 00:00:00+00',
    '2023-02-29 00:00:00+00',
    '2024-04-31 00:00:00+00',
    '2024-01-01 24:00:00+00',
    '2024-01-01 00:60:00+00',
    '2024-01-01 00:00:60+00',
    '2024-01-01 00:00:00+16',
    '2024-01-01 00:00:00.1234567+00',
    '2024-01-01',
    '2024-01-01 00:00:00',
    `2024-01-01 00:00:00+00${'0'.repeat(50)}`,
  ];
  for (const ts of bad) t.throws(() => decodeCursor(raw({ t: ts, id })), InvalidCursorError, ts);
  for (const cursor of ['nope', raw({ t: '2024-01-01 00:00:00+00', id: 'x' }), raw([1, 2]), raw(null), '%%%']) {
    t.throws(() => decodeCursor(cursor), InvalidCursorError, cursor);
  }
});
