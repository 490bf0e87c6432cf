// A fresh database per test file, cloned from the migrated template that
// test/run.ts prepared. Dropped when the file's tests end.
import { randomBytes } from 'node:crypto';
import { cpSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import type { Test } from 'tap';
import { z } from 'zod';
import { migrate, MIGRATIONS_DIR } from '../../core/db/migrate.ts';
import { testLogger } from './config.ts';
import { createDatabasePool, sql, type CommonQueryMethods, type DatabasePool } from '../../core/db/pool.ts';

function env(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run the tests with \`npm test\``);
  return value;
}

export const adminUrl = () => env('TEST_ADMIN_URL');
export const templateName = () => env('TEST_TEMPLATE_DB');

function urlFor(database: string): string {
  const url = new URL(adminUrl());
  url.pathname = `/${database}`;
  return url.toString();
}

async function admin<T>(fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: adminUrl() });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/** Creates an empty database (no migrations) or a clone of the migrated template. */
export async function createTestDatabase(t: Test, options: { empty?: boolean } = {}): Promise<string> {
  const name = `${templateName()}_${randomBytes(4).toString('hex')}`;
  await admin((c) =>
    c.query(options.empty ? `create database "${name}"` : `create database "${name}" template "${templateName()}"`),
  );
  t.teardown(() => admin((c) => c.query(`drop database if exists "${name}" with (force)`)));
  return urlFor(name);
}

/** A slonik pool on the database, ended after the test. */
export async function testPool(t: Test, databaseUrl: string): Promise<DatabasePool> {
  const pool = await createDatabasePool(databaseUrl, { maximumPoolSize: 5 });
  t.teardown(() => pool.end());
  return pool;
}

/** The number of rows in a table (what a refused request must not have changed). */
export const rowCount = (db: CommonQueryMethods, table: string) =>
  db.oneFirst(sql.type(z.object({ n: z.number() }))`select count(*)::int as n from ${sql.identifier([table])}`);

/** A new database migrated up to, not including, migration `first` (an upgrade test's starting point). */
export async function createDatabaseBefore(t: Test, first: string): Promise<string> {
  const url = await createTestDatabase(t, { empty: true });
  const before = mkdtempSync(path.join(tmpdir(), 'migrations-'));
  t.teardown(() => rmSync(before, { recursive: true, force: true }));
  for (const name of readdirSync(MIGRATIONS_DIR).filter((n) => n < first))
    cpSync(path.join(MIGRATIONS_DIR, name), path.join(before, name));
  await migrate(url, testLogger(), before);
  return url;
}
