// The plans of the hot requests' queries on a database with history in it
// (the bench's scale model at 2%: 200,000 finished jobs, 40,000 messages,
// 20,000 usage records, 2,000 sessions, 200 tenants): every statement the
// requests run is recorded as it runs, then explained with its own values,
// and run again in a transaction rolled back with auto_explain logging the
// plans inside it (chat_send_round, triggers); none may read a big table
// from end to end. The bench (BENCH_SCALE=1) times
// the same requests at full scale.
import t from 'tap';
import pg from 'pg';
import type { Interceptor } from 'slonik';
import { loadConfig } from '../../../core/config.ts';
import { createDatabasePool, sql } from '../../../core/db/pool.ts';
import { probe, SCALE_FIGURES, seedScale } from '../../../ops/bench/scale.ts';
import { testEnv, testLogger } from '../../helpers/config.ts';
import { createTestDatabase } from '../../helpers/db.ts';

const BIG_TABLES = ['jobs', 'chat_messages', 'usage_records', 'chat_sessions'];
const databaseUrl = await createTestDatabase(t);
const recorded: Array<{ sql: string; values: readonly unknown[] }> = [];
let recording = false;
const recorder: Interceptor = {
  name: 'plan-recorder',
  beforeQueryExecution: (_context, query) => {
    if (recording) recorded.push({ sql: query.sql, values: query.values });
    return null;
  },
};
const db = await createDatabasePool(databaseUrl, { interceptors: [recorder] });
t.teardown(() => db.end());
const ctx = { url: databaseUrl, db, logger: testLogger('plans'), seconds: 1, tenantId: '' };
await seedScale(ctx, 0.02);
const config = loadConfig(testEnv(databaseUrl));
const p = await probe(ctx, config);
t.teardown(() => p.close());
const explainer = new pg.Client({ connectionString: databaseUrl });
await explainer.connect();
t.teardown(() => explainer.end());

type PlanNode = { 'Node Type': string; 'Relation Name'?: string; Plans?: PlanNode[] };
/** The tables among `tables` that the plan reads from end to end. */
const seqScans = (node: PlanNode, tables: readonly string[] = BIG_TABLES): string[] => [
  ...(node['Node Type'] === 'Seq Scan' && node['Relation Name'] && tables.includes(node['Relation Name'])
    ? [node['Relation Name']]
    : []),
  ...(node.Plans ?? []).flatMap((child) => seqScans(child, tables)),
];

// Statements inside functions (chat_send_round) and triggers have plans of
// their own that EXPLAIN does not show: auto_explain logs every plan of a
// statement run again inside a transaction that is rolled back, and LOG
// messages reach this client as notices.
await explainer.query(`load 'auto_explain'`);
await explainer.query(
  `set auto_explain.log_min_duration = 0; set auto_explain.log_nested_statements = on; set auto_explain.log_format = json; set client_min_messages = log`,
);
let logged: PlanNode[] = [];
explainer.on('notice', (notice) => {
  const at = notice.message?.indexOf('plan:') ?? -1;
  if (at >= 0) logged.push((JSON.parse(notice.message!.slice(at + 'plan:'.length)) as { Plan: PlanNode }).Plan);
});

/** Every plan the statement ran, nested ones included; null when it cannot run again (a key it inserted exists now). */
const executedPlans = async (text: string, values: readonly unknown[]): Promise<PlanNode[] | null> => {
  logged = [];
  await explainer.query('begin');
  try {
    await explainer.query(text, values as unknown[]); // its notices arrive before its answer
    return logged;
  } catch {
    return null;
  } finally {
    await explainer.query('rollback');
  }
};

const planOf = async (text: string, values: readonly unknown[]) => {
  const { rows } = await explainer.query(`explain (format json) ${text}`, values as unknown[]);
  return (rows[0] as { 'QUERY PLAN': Array<{ Plan: PlanNode }> })['QUERY PLAN'][0]!.Plan;
};

t.test('the check sees a sequential scan where there is one', async (t) => {
  t.same(
    seqScans(await planOf('select id from jobs where kind = $1', ['nothing'])),
    ['jobs'],
    'jobs has no index on kind',
  );
  const inside = await executedPlans(`do $$ begin perform 1 from jobs where kind = 'nothing'; end $$`, []);
  t.same(
    inside?.flatMap((plan) => seqScans(plan)),
    ['jobs'],
    'and sees one inside a function',
  );
});

for (const figure of SCALE_FIGURES) {
  t.test(`${figure}: no sequential scan of a big table`, async (t) => {
    await p.requests[figure](); // warm: caches fill as they would in a running api
    recorded.length = 0;
    recording = true;
    await p.requests[figure]();
    recording = false;
    const statements = recorded.filter(
      (q) => !/^\s*(begin|commit|rollback|savepoint|release|set |select pg_notify|listen|unlisten)/i.test(q.sql),
    );
    let nested = 0;
    for (const q of statements) {
      const shown = q.sql.replace(/\s+/g, ' ').slice(0, 160);
      t.same(seqScans(await planOf(q.sql, q.values)), [], shown);
      const ran = await executedPlans(q.sql, q.values);
      if (!ran) continue;
      nested += Math.max(0, ran.length - 1);
      t.same(
        ran.flatMap((plan) => seqScans(plan)),
        [],
        `run again, every plan inside it: ${shown}`,
      );
    }
    t.pass(`${statements.length} statements explained, ${nested} plans inside functions and triggers`);
  });
}

// The operator console's pages (core/console) on the same history: an open
// page is rendered again on every change, so none may read a big table
// from end to end either.
t.test('the operator console: no sequential scan of a big table', async (t) => {
  const { CONSOLE_PAGES } = await import('../../../api/routes/console/views/index.ts');
  const job = (await db.one(sql.unsafe`select id, tenant_id, kind from jobs order by created_at desc limit 1`)) as {
    id: string;
    tenant_id: string;
    kind: string;
  };
  const paths: Array<[string, Record<string, string>, Record<string, string>]> = [
    ['/console', {}, {}],
    ['/console/jobs', {}, {}],
    ['/console/jobs', {}, { state: 'failed' }],
    ['/console/jobs', {}, { state: 'open' }],
    ['/console/jobs', {}, { tenant: job.tenant_id }],
    ['/console/jobs/:jobId', { jobId: job.id }, {}],
    ['/console/workers', {}, {}],
    ['/console/schedules', {}, {}],
    ['/console/tenants', {}, {}],
    ['/console/tenants/:tenantId', { tenantId: job.tenant_id }, {}],
    ['/console/audit', {}, {}],
  ];
  for (const [path, params, query] of paths) {
    const page = CONSOLE_PAGES.find((p) => p.path === path)!;
    recorded.length = 0;
    recording = true;
    const view = await page.view({ db, config, csrf: 'x' }, { params, query });
    recording = false;
    t.ok(view, `${path} renders`);
    for (const q of recorded) {
      t.same(
        seqScans(await planOf(q.sql, q.values)),
        [],
        `${path} ${JSON.stringify(query)}: ${q.sql.replace(/\s+/g, ' ').slice(0, 120)}`,
      );
    }
  }
});

// A serial queue's wake-up claims its oldest unfinished job, and the end of a
// job wakes its queue (migration 0043): both by the queue's index, however
// many queues there are and however long one is.
t.test('a serial queue is claimed and woken by index', async (t) => {
  const tenant = (await db.oneFirst(sql.unsafe`select id from tenants limit 1`)) as string;
  await db.query(sql.unsafe`
    insert into jobs (id, tenant_id, kind, pool, queue_name, input)
    select gen_random_uuid(), ${tenant}, 'diag.noop', 'short', case when n <= 3000 then 'plans:' || (n % 300) else 'plans:long' end, '{}'
    from generate_series(1, 4000) n`);
  await db.query(sql.unsafe`analyze jobs`);
  for (const text of [
    `select * from queue_claim(array['plans:long', 'plans:7'], array['plans', 'plans'])`,
    `select queue_wake(array['plans:long', 'plans:7'])`,
  ]) {
    const ran = await executedPlans(text, []);
    t.ok(ran && ran.length > 1, `${text}: plans inside it recorded`);
    t.same(
      ran!.flatMap((plan) => seqScans(plan)),
      [],
      `${text}: no sequential scan`,
    );
  }
});
