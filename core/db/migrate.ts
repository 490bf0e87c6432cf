// Plain numbered SQL migrations (sql/migrations/NNNN_name.sql), each applied
// once, in order, in its own transaction. A session advisory lock serialises
// processes that start together. Graphile Worker's own schema is migrated
// first, under the same lock.
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import type { Logger } from 'pino';
import { z } from 'zod';
import { sql, type CommonQueryMethods } from './pool.ts';

export const MIGRATIONS_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../sql/migrations');
// Any constant works; it only has to be the same in every process.
const MIGRATION_LOCK_KEY = 7_301_552_001;

export type Migration = { name: string; sql: string; checksum: string };

export function loadMigrations(directory = MIGRATIONS_DIR): Migration[] {
  return readdirSync(directory)
    .filter((f) => /^\d{4}_[a-z0-9_]+\.sql$/.test(f))
    .sort()
    .map((name) => {
      const sql = readFileSync(path.join(directory, name), 'utf8');
      return { name, sql, checksum: createHash('sha256').update(sql).digest('hex') };
    });
}

/** The number of Graphile Worker migrations shipped with the installed version. */
function workerMigrationCount(): number {
  // From the entry point (dist/index.js), not package.json, which the
  // package does not export; the migrations are in sql/ beside dist/.
  const entry = fileURLToPath(import.meta.resolve('graphile-worker'));
  const dir = path.join(path.dirname(entry), '..', 'sql');
  return readdirSync(dir).filter((f) => /^\d+\.sql$/.test(f)).length;
}

const ensureTable = `
  create table if not exists schema_migrations (
    name text primary key,
    checksum text not null,
    applied_at timestamptz not null default now()
  )`;

/** `directory` is for tests that stop at an older migration. */
export async function migrate(
  databaseUrl: string,
  logger: Logger,
  directory = MIGRATIONS_DIR,
): Promise<{ applied: string[] }> {
  const migrations = loadMigrations(directory);
  const client = new pg.Client({ connectionString: databaseUrl });
  // A connection lost while idle (between statements) surfaces as the next
  // query's error; without a listener pg's 'error' event would end the process.
  client.on('error', (error) => logger.debug({ reason: error.message }, 'migration connection lost'));
  await client.connect();
  const applied: string[] = [];
  const started = Date.now();
  try {
    await client.query('select pg_advisory_lock($1)', [MIGRATION_LOCK_KEY]);
    // Loaded here: an api process reads migrationState() but never migrates.
    const [{ runMigrations: runWorkerMigrations }, { graphileLogger }] = await Promise.all([
      import('graphile-worker'),
      import('../graphile-logger.ts'),
    ]);
    // Our own pool, ended and awaited here: given a connection string,
    // Graphile ends its pool without waiting and drops its error listener
    // first, so a server that goes away meanwhile would throw in this process.
    const workerPool = new pg.Pool({ connectionString: databaseUrl, max: 1 });
    workerPool.on('error', (error) => logger.debug({ reason: error.message }, 'migration pool: idle connection lost'));
    workerPool.on('connect', (c) =>
      c.on('error', (error) => logger.debug({ reason: error.message }, 'migration pool: connection lost')),
    );
    try {
      await runWorkerMigrations({ pgPool: workerPool, logger: graphileLogger(logger) });
    } finally {
      await workerPool.end();
    }
    await client.query(ensureTable);
    const done = new Map(
      (await client.query<{ name: string; checksum: string }>('select name, checksum from schema_migrations')).rows.map(
        (r) => [r.name, r.checksum],
      ),
    );
    for (const migration of migrations) {
      const known = done.get(migration.name);
      if (known !== undefined) {
        if (known !== migration.checksum) {
          logger.warn(
            { migration: migration.name },
            'migration file changed after it was applied; write a new migration instead',
          );
        }
        continue;
      }
      await client.query('begin');
      try {
        await client.query(migration.sql);
        await client.query('insert into schema_migrations (name, checksum) values ($1, $2)', [
          migration.name,
          migration.checksum,
        ]);
        await client.query('commit');
      } catch (error) {
        await client.query('rollback');
        throw new Error(`migration ${migration.name} failed: ${(error as Error).message}`);
      }
      applied.push(migration.name);
      logger.debug({ migration: migration.name }, 'migration applied');
    }
    // One line however many: a first start applies them all.
    if (applied.length > 0) {
      logger.info(
        { count: applied.length, first: applied[0], last: applied.at(-1), ms: Date.now() - started },
        `${applied.length} migration${applied.length === 1 ? '' : 's'} applied`,
      );
    }
  } finally {
    await client.query('select pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY]).catch(() => undefined);
    await client.end();
  }
  return { applied };
}

export type MigrationState = { current: boolean; pending: string[]; workerSchemaCurrent: boolean };

const expected = { ours: loadMigrations().map((m) => m.name), worker: workerMigrationCount() };

/** What is missing from a database: used by /readyz and the production start check. */
export async function migrationState(db: CommonQueryMethods): Promise<MigrationState> {
  const tablesExist = await db.oneFirst(sql.type(z.object({ ok: z.boolean() }))`
    select to_regclass('schema_migrations') is not null
       and to_regclass('graphile_worker.migrations') is not null as ok`);
  if (!tablesExist) return { current: false, pending: [...expected.ours], workerSchemaCurrent: false };
  const row = await db.one(sql.type(z.object({ ours: z.array(z.string()), worker: z.number().nullable() }))`
    select
      (select coalesce(json_agg(name), '[]'::json) from schema_migrations) as ours,
      (select max(id) from graphile_worker.migrations)::int as worker`);
  const appliedNames = new Set(row.ours);
  const pending = expected.ours.filter((name) => !appliedNames.has(name));
  const workerSchemaCurrent = (row.worker ?? 0) >= expected.worker;
  return { current: pending.length === 0 && workerSchemaCurrent, pending, workerSchemaCurrent };
}
