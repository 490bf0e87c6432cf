// Bounded growth: every table is swept by retention or kept for a stated
// reason, docs/configuration.md lists each swept table with its setting, and the sweep
// deletes what is past retention while keeping what a reader still needs.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { z } from 'zod';
import { sql } from '../../../core/db/pool.ts';
import { EXPIRING_ROWS, sweepExpiredRows } from '../../../core/maintenance/expired-rows.ts';
import { KEPT_TABLES } from '../../../core/maintenance/kept-tables.ts';
import { rollup } from '../../../core/usage/rollup.ts';
import { testConfig } from '../../helpers/config.ts';
import { createTestDatabase, testPool } from '../../helpers/db.ts';
import { createMember } from '../../helpers/fixtures.ts';
import { sourceRoot } from '../../helpers/paths.ts';

const databaseUrl = await createTestDatabase(t);
const db = await testPool(t, databaseUrl);
const config = testConfig(databaseUrl);
const Name = z.object({ name: z.string() });

t.test('every table is swept by retention or kept for a reason, never both', async (t) => {
  const tables = await db.anyFirst(sql.type(Name)`
    select tablename as name from pg_tables where schemaname = current_schema() order by 1`);
  const swept = new Set(EXPIRING_ROWS.map((e) => e.table));
  const kept = new Set(Object.keys(KEPT_TABLES));
  // The migration ledger grows with the code, not with traffic.
  const ledger = new Set(['schema_migrations']);
  for (const table of tables) {
    if (ledger.has(table)) continue;
    t.ok(
      swept.has(table) !== kept.has(table),
      `${table}: ${swept.has(table) ? 'swept' : kept.has(table) ? `kept (${KEPT_TABLES[table]})` : 'neither swept nor kept: decide how it stays bounded'}`,
    );
  }
  for (const name of [...swept, ...kept]) t.ok(tables.includes(name), `${name} exists`);
});

t.test('docs/configuration.md lists every swept table and its retention setting', async (t) => {
  const page = readFileSync(path.join(sourceRoot, 'docs/configuration.md'), 'utf8');
  // From the "## Retention" heading to the next heading of its level or above.
  const start = page.search(/^## Retention$/m);
  t.ok(start >= 0, 'docs/configuration.md has a Retention section');
  const rest = page.slice(start + '## Retention'.length);
  const end = rest.search(/^#{1,2} /m);
  const section = start < 0 ? '' : end < 0 ? rest : rest.slice(0, end);
  for (const entry of EXPIRING_ROWS) t.match(section, `\`${entry.table}\``, entry.table);
  for (const setting of ['JOB_RETENTION_DAYS', 'USAGE_RECORD_RETENTION_DAYS', 'EVENT_RETENTION_DAYS'])
    t.match(section, setting);
});

t.test('the sweep deletes what is past retention and keeps what is still read', async (t) => {
  const member = await createMember(db);
  const Count = z.object({ n: z.number() });
  const count = (query: ReturnType<typeof sql.fragment>) =>
    db.oneFirst(sql.type(Count)`select count(*)::int as n from ${query}`);
  const usage = (occurred: string) => sql.fragment`
    insert into usage_records (tenant_id, provider, model, input_tokens, output_tokens, cost_micros, occurred_at)
    values (${member.tenantId}, 'openai', 'openai/gpt-4o-mini', 10, 20, 30, now() - ${occurred}::interval)`;
  // Two days past retention: one rolled up (its totals in usage_daily), one still queued.
  await db.query(sql.unsafe`${usage('500 days')}`);
  const rolledDay = await db.oneFirst(sql.type(Name)`select usage_day(now() - interval '500 days')::text as name`);
  await rollup(db, { days: [rolledDay] });
  await db.query(sql.unsafe`delete from usage_rollup_queue where tenant_id = ${member.tenantId}`);
  await db.query(sql.unsafe`${usage('450 days')}`);
  await db.query(sql.unsafe`${usage('1 day')}`);

  const event = (id: string, status: string, age: string) => sql.unsafe`
    insert into billing_events (provider, event_id, type, payload, status, received_at)
    values ('stripe', ${id}, 'invoice.paid', '{}', ${status}, now() - ${age}::interval)`;
  await db.query(event('evt_old', 'applied', '200 days'));
  await db.query(event('evt_old_queued', 'queued', '200 days'));
  await db.query(event('evt_new', 'applied', '1 day'));
  await db.query(sql.unsafe`
    insert into billing_sandbox_idempotency (key, fingerprint, status, response, created_at)
    values ('old', 'f', 200, '{}', now() - interval '2 days'), ('new', 'f', 200, '{}', now())`);

  const removed = await sweepExpiredRows(db, config);
  t.equal(removed['usage records past USAGE_RECORD_RETENTION_DAYS, rolled up'], 1, 'the rolled-up old record');
  t.equal(
    await count(sql.fragment`usage_records where tenant_id = ${member.tenantId}`),
    2,
    'the queued old day and the recent record stay',
  );
  t.equal(
    await count(sql.fragment`usage_daily where tenant_id = ${member.tenantId} and day = ${rolledDay}::date`),
    1,
    "the swept day's totals stay in usage_daily",
  );
  t.same(
    await db.anyFirst(sql.type(Name)`select event_id as name from billing_events order by 1`),
    ['evt_new', 'evt_old_queued'],
    'a queued event is never swept',
  );
  t.same(await db.anyFirst(sql.type(Name)`select key as name from billing_sandbox_idempotency`), ['new']);
  for (const entry of EXPIRING_ROWS) t.type(removed[entry.name], 'number', `${entry.name}: its statement runs`);
});
