// The usage rollup: whole days recomputed, so repeated, concurrent and
// retried runs give the same usage_daily rows; records committed during a
// run stay queued; the scheduled task runs it on a real worker.
import pg from 'pg';
import t from 'tap';
import { z } from 'zod';
import { sql } from '../../core/db/pool.ts';
import { totalsOver } from '../../core/usage/reports.ts';
import { rollup } from '../../core/usage/rollup.ts';
import { CRON_ITEMS } from '../../schedules/index.ts';
import { TASKS } from '../../workers/tasks/index.ts';
import { createTestDatabase, testPool } from '../helpers/db.ts';
import { createMember } from '../helpers/fixtures.ts';
import { waitFor } from '../helpers/wait.ts';
import { startTestWorker } from '../helpers/worker.ts';

const databaseUrl = await createTestDatabase(t);
const db = await testPool(t, databaseUrl);
const a = await createMember(db);
const b = await createMember(db);

const insert = (tenantId: string, ago: string, cost: number, model = 'openai/gpt-x') =>
  db.query(sql.unsafe`
    insert into usage_records (tenant_id, provider, model, input_tokens, output_tokens, cost_micros, occurred_at)
    values (${tenantId}, 'openai', ${model}, ${cost}, 1, ${cost}, now() - ${ago}::interval)`);

const Daily = z.object({
  tenant_id: z.string(),
  day: z.string(),
  model: z.string(),
  agent_key: z.string(),
  cost: z.number(),
  records: z.number(),
});
const daily = () =>
  db.any(sql.type(Daily)`
    select tenant_id, day::text as day, model, agent_key, cost_micros::float8 as cost, records
    from usage_daily order by tenant_id, day, model, agent_key, provider`);
// What usage_daily must hold: the raw records grouped the same way, computed independently.
const expected = () =>
  db.any(sql.type(Daily)`
    select tenant_id, ((occurred_at at time zone 'UTC')::date)::text as day, model,
      coalesce(agent_id, '00000000-0000-0000-0000-000000000000') as agent_key, sum(cost_micros)::float8 as cost, count(*)::int as records
    from usage_records group by 1, 2, 3, 4, provider order by 1, 2, 3, 4, provider`);
const queued = () =>
  db.oneFirst(sql.type(z.object({ n: z.number() }))`select count(*)::int as n from usage_rollup_queue`);
const Days = z.object({ today: z.string(), from: z.string() });
const { today, from } = await db.one(
  sql.type(Days)`select usage_day(now())::text as today, (usage_day(now()) - 60)::text as "from"`,
);

for (const [tenant, n] of [
  [a.tenantId, 1],
  [b.tenantId, 2],
] as const) {
  for (const ago of ['1 minute', '3 hours', '1 day', '2 days', '10 days', '40 days'])
    await insert(tenant, ago, 100 * n);
  await insert(tenant, '1 day', 7, 'anthropic/claude');
}

t.test('the cron item and the task are registered', async (t) => {
  const item = CRON_ITEMS.find((i) => i.identifier === 'usage_rollup');
  t.match(item, { task: 'usage.rollup', match: '*/10 * * * *', options: { backfillPeriod: 0 } });
  t.ok(TASKS.some((task) => task.kind === 'usage.rollup'));
});

t.test('a run rolls up every queued day; running it again changes nothing', async (t) => {
  const before = await totalsOver(db, a.tenantId, { from, to: today });
  t.ok((await queued()) > 0, 'inserts queue their days');
  const first = await rollup(db);
  t.equal(await queued(), 0, 'the queue is drained');
  t.ok(
    first.days.some((d) => d.scope === 'queued'),
    'older queued days were rolled up too',
  );
  const rows = await daily();
  t.same(rows, await expected(), 'usage_daily equals the raw records, grouped');
  await rollup(db);
  await rollup(db, { days: [today] });
  t.same(await daily(), rows, 'no double counting');
  t.same(await totalsOver(db, a.tenantId, { from, to: today }), before, 'reports unchanged by the rollup');
});

t.test('concurrent runs give the same rows', async (t) => {
  await insert(a.tenantId, '5 days', 55);
  await Promise.all([rollup(db), rollup(db), rollup(db)]);
  t.same(await daily(), await expected());
});

t.test('a run that fails half-way is retried to the same rows', async (t) => {
  await insert(a.tenantId, '3 days', 33);
  await insert(b.tenantId, '4 days', 44);
  const failing = await db.oneFirst(sql.type(z.object({ d: z.string() }))`select (usage_day(now()) - 3)::text as d`);
  // Make the recompute of one day fail, as a crash or a lost connection would.
  await db.query(sql.unsafe`
    create function fail_rollup() returns trigger language plpgsql as $$
    begin raise exception 'simulated failure'; end $$`);
  await db.query(sql.unsafe`
    create trigger fail_rollup before insert on usage_daily for each row
    when (new.day = ${sql.literalValue(failing)}::date) execute function fail_rollup()`);
  await t.rejects(rollup(db), /simulated failure/);
  const queuedDays = await db.anyFirst(
    sql.type(z.object({ day: z.string() }))`select distinct day::text as day from usage_rollup_queue`,
  );
  t.ok(queuedDays.includes(failing), 'the failed day is still queued');
  const raw = await db.oneFirst(sql.type(z.object({ cost: z.number() }))`
    select sum(cost_micros)::float8 as cost from usage_records where tenant_id = ${a.tenantId} and occurred_at >= now() - interval '59 days'`);
  t.equal((await totalsOver(db, a.tenantId, { from, to: today })).cost_micros, raw, 'reports stay exact meanwhile');
  await db.query(sql.unsafe`drop trigger fail_rollup on usage_daily`);
  await rollup(db);
  await rollup(db);
  t.same(await daily(), await expected(), 'the retry completes the rows, counting nothing twice');
  t.equal(await queued(), 0);
});

t.test('a record committed while a rollup runs stays queued', async (t) => {
  const Total = z.object({ cost: z.number() });
  const raw = () =>
    db.oneFirst(sql.type(Total)`
    select coalesce(sum(cost_micros), 0)::float8 as cost from usage_records
    where tenant_id = ${b.tenantId} and occurred_at >= now() - interval '61 days'`);
  // A plain pg client holds the open transaction (slonik ties a transaction to its async context).
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  t.teardown(() => client.end());
  await client.query('begin');
  await client.query(
    `
    insert into usage_records (tenant_id, provider, model, input_tokens, output_tokens, cost_micros, occurred_at)
    values ($1, 'openai', 'openai/late', 1, 1, 999, now() - interval '8 days')`,
    [b.tenantId],
  );
  const run = await rollup(db); // cannot see the record yet
  t.notOk(
    run.days.some((d) => d.scope === 'queued'),
    'nothing queued is visible to it',
  );
  await client.query('commit');
  t.ok((await queued()) >= 1, 'the late record is queued after the rollup');
  const live = await totalsOver(db, b.tenantId, { from, to: today });
  t.equal(live.cost_micros, await raw(), 'reports read queued days from the raw records');
  await rollup(db);
  t.same(await daily(), await expected());
  t.equal((await totalsOver(db, b.tenantId, { from, to: today })).cost_micros, await raw());
});

t.test('the scheduled task runs the rollup on a real worker and records its run', async (t) => {
  await insert(b.tenantId, '2 days', 21);
  const worker = await startTestWorker(t, databaseUrl);
  await worker.runner.addJob('usage.rollup', {});
  await worker.runner.addJob('usage.rollup', {});
  const Run = z.object({ status: z.string(), detail: z.unknown() });
  const runs = await waitFor('two rollup runs', async () => {
    const rows = await db.any(sql.type(Run)`select status, detail from scheduled_job_runs where task = 'usage.rollup'`);
    return rows.length >= 2 ? rows : null;
  });
  t.ok(runs.every((r) => r.status === 'succeeded'));
  t.match(runs[0]!.detail, { days: [{ day: String, scope: 'all' }] });
  t.same(await daily(), await expected());
  t.equal(await queued(), 0);
});
