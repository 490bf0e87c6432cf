import t from 'tap';
import { z } from 'zod';
import { sql } from '../../../core/db/pool.ts';
import { loadMigrations, migrate, migrationState } from '../../../core/db/migrate.ts';
import { createTestDatabase, testPool } from '../../helpers/db.ts';
import { testLogger } from '../../helpers/config.ts';

t.test('several processes migrating at once apply each migration exactly once', async (t) => {
  const url = await createTestDatabase(t, { empty: true });
  const db = await testPool(t, url);
  t.notOk((await migrationState(db)).current, 'an empty database is not current');
  const results = await Promise.all([1, 2, 3, 4].map(() => migrate(url, testLogger())));
  const applied = results.flatMap((r) => r.applied);
  t.same(
    applied,
    loadMigrations().map((m) => m.name),
    'all applied once, in order, by one of them',
  );
  const state = await migrationState(db);
  t.ok(state.current);
  t.same(state.pending, []);
  const rows = await db.oneFirst(
    sql.type(z.object({ n: z.number() }))`select count(*)::int as n from schema_migrations`,
  );
  t.equal(rows, loadMigrations().length);
  t.same((await migrate(url, testLogger())).applied, [], 'running again applies nothing');
});

t.test('migrations are named NNNN_name.sql and numbered without gaps', async (t) => {
  const names = loadMigrations().map((m) => m.name);
  for (const [i, name] of names.entries()) t.ok(name.startsWith(`${String(i + 1).padStart(4, '0')}_`), name);
});

t.test('a first migration logs one line at info, however many migrations it applies', async (t) => {
  const url = await createTestDatabase(t, { empty: true });
  const lines: Array<Record<string, unknown>> = [];
  const { createLogger } = await import('../../../core/logger.ts');
  const { Writable } = await import('node:stream');
  const logger = createLogger('info', 'migrate-test', {
    format: 'json',
    destination: new Writable({
      write: (chunk, _e, done) => {
        lines.push(JSON.parse(String(chunk)));
        done();
      },
    }),
  });
  await migrate(url, logger);
  const ours = lines.filter((l) => /migration/.test(String(l.msg)));
  t.equal(ours.length, 1, `one line: ${ours.map((l) => l.msg).join(' | ')}`);
  t.match(ours[0], {
    msg: `${loadMigrations().length} migrations applied`,
    count: loadMigrations().length,
    first: '0001_engine.sql',
  });
});
