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
  t.same(applied, loadMigrations().map((m) => m.name), 'all applied once, in order, by one of them');
  const state = await migrationState(db);
  t.ok(state.current);
  t.same(state.pending, []);
  const rows = await db.oneFirst(sql.type(z.object({ n: z.number() }))`select count(*)::int as n from schema_migrations`);
  t.equal(rows, loadMigrations().length);
  t.same((await migrate(url, testLogger())).applied, [], 'running again applies nothing');
});

t.test('migrations are named NNNN_name.sql and numbered without gaps', async (t) => {
  const names = loadMigrations().map((m) => m.name);
  names.forEach((name, i) => t.ok(name.startsWith(String(i + 1).padStart(4, '0') + '_'), name));
});

t.test("Graphile's add_jobs plans each call, and a migrate run restores the setting when a Graphile upgrade dropped it", async (t) => {
  const url = await createTestDatabase(t);
  const db = await testPool(t, url);
  const config = () => db.oneFirst(sql.type(z.object({ config: z.array(z.string()).nullable() }))`
    select proconfig as config from pg_proc where oid = 'graphile_worker.add_jobs(graphile_worker.job_spec[], boolean)'::regprocedure`);
  t.same(await config(), ['plan_cache_mode=force_custom_plan'], 'set by the migrated template');
  // What a Graphile migration that re-creates the function leaves behind.
  await db.query(sql.unsafe`alter function graphile_worker.add_jobs(graphile_worker.job_spec[], boolean) reset all`);
  t.same(await config(), null);
  await migrate(url, testLogger());
  t.same(await config(), ['plan_cache_mode=force_custom_plan'], 'back after the next migrate');
  // The statement the setting is for still does its work: a job key that names
  // a job already running moves to a new job.
  const add = () => db.oneFirst(sql.type(z.object({ id: z.string() }))`
    select id::text from graphile_worker.add_jobs(array[('t', '{}', null, null, null, 'k1', null, null)::graphile_worker.job_spec])`);
  const first = await add();
  await db.query(sql.unsafe`update graphile_worker._private_jobs set locked_at = now(), locked_by = 'test' where id = ${first}`);
  const second = await add();
  t.not(second, first, 'a new job for the running one');
  const keys = await db.any(sql.type(z.object({ id: z.string(), key: z.string().nullable() }))`
    select id::text, key from graphile_worker._private_jobs order by id`);
  t.same(keys, [{ id: first, key: null }, { id: second, key: 'k1' }], 'the running job lost its key');
});
