// Job and message ids are UUIDv7: valid UUIDs whose order is their order of making.
import t from 'tap';
import { z } from 'zod';
import { timeOrderedId } from '../../core/ids.ts';

t.test('a UUIDv7 that zod and PostgreSQL read as a UUID', async (t) => {
  const id = timeOrderedId(Date.UTC(2026, 10, 28, 20, 0, 0));
  t.match(id, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  t.ok(z.uuid().safeParse(id).success);
  t.equal(
    Number.parseInt(id.replace(/-/g, '').slice(0, 12), 16),
    Date.UTC(2026, 10, 28, 20, 0, 0),
    'the time in front',
  );
});

t.test('ids made one after another sort in that order, within a millisecond and past 4,096 of them', async (t) => {
  const now = Date.now() + 60_000;
  const ids = Array.from({ length: 10_000 }, () => timeOrderedId(now));
  const sorted = [...ids].sort();
  t.same(sorted, ids);
  t.equal(new Set(ids).size, ids.length, 'no two alike');
  t.ok(timeOrderedId(now - 5_000) > ids.at(-1)!, 'a clock that steps back does not break the order');
});
