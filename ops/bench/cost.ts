import pg from 'pg';
import { buildApp } from '../../api/app.ts';
import { signPlatformToken } from '../../core/auth/platform-token.ts';
import { createDatabasePool, sql, type DatabasePool } from '../../core/db/pool.ts';
import { JobEventHub } from '../../core/jobs/events.ts';
import { GroupCommitter } from '../../core/jobs/group-commit.ts';
import { startWorker } from '../../workers/worker.ts';
import { chatSendLoad } from './chat-load.ts';
import { cpuDuring } from './cpu.ts';
import { postJson, sleep, throughput } from './measure.ts';
import {
  enqueueBacklog,
  enqueueUngrouped,
  graphileNoopRunner,
  truncateQueues,
  type BenchContext,
  type BenchRun,
} from './scenarios.ts';

/** Per operation. */
export type Cost = {
  ops: number;
  inserts: number;
  updates: number;
  hot: number;
  deletes: number;
  /** of the rows above, those of graphile_worker's tables */
  graphileRows: number;
  indexEntries: number;
  walBytes: number;
  cpuMicros: number | null;
};

const JOBS = 3000;

type Phase = { ops: number; close: () => Promise<void> };

/** Sums of the write counters of every non-catalog table, and of graphile_worker's. */
async function tableCounts(meter: pg.Client) {
  const { rows } = await meter.query<{ ins: string; upd: string; hot: string; del: string; gw: string }>(`
    select coalesce(sum(n_tup_ins), 0) as ins, coalesce(sum(n_tup_upd), 0) as upd,
      coalesce(sum(n_tup_hot_upd), 0) as hot, coalesce(sum(n_tup_del), 0) as del,
      coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del) filter (where schemaname = 'graphile_worker'), 0) as gw
    from pg_stat_all_tables where schemaname not in ('pg_catalog', 'information_schema') and schemaname not like 'pg_toast%'`);
  const r = rows[0]!;
  return { ins: Number(r.ins), upd: Number(r.upd), hot: Number(r.hot), del: Number(r.del), gw: Number(r.gw) };
}

const clientPids = async (meter: pg.Client) =>
  new Set(
    (
      await meter.query<{ pid: number }>(`select pid from pg_stat_activity where backend_type = 'client backend'`)
    ).rows.map((r) => r.pid),
  );

/** Measures one phase: `start` runs the operations and hands back how to close their connections. */
async function measure(ctx: BenchContext, meter: pg.Client, start: () => Promise<Phase>): Promise<Cost> {
  await sleep(11_000);
  await meter.query('checkpoint');
  const before = await clientPids(meter);
  const counts = await tableCounts(meter);
  const lsn = (await meter.query<{ lsn: string }>('select pg_current_wal_lsn() as lsn')).rows[0]!.lsn;
  const { result: phase, cpu } = await cpuDuring(ctx.db, start);
  await phase.close();
  // Until the phase's backends have exited, and so published their counts.
  for (let i = 0; i < 100; i++) {
    const now = await clientPids(meter);
    if ([...now].every((pid) => before.has(pid))) break;
    await sleep(100);
  }
  const after = await tableCounts(meter);
  const wal = await meter.query<{ bytes: string; entries: string }>(
    `select pg_current_wal_lsn() - $1::pg_lsn as bytes,
      (select coalesce(sum(count), 0) from pg_get_wal_stats($1::pg_lsn, pg_current_wal_lsn(), true)
        where "resource_manager/record_type" in ('Btree/INSERT_LEAF', 'Btree/INSERT_POST', 'Btree/SPLIT_L', 'Btree/SPLIT_R')) as entries`,
    [lsn],
  );
  const n = phase.ops;
  return {
    ops: n,
    inserts: (after.ins - counts.ins) / n,
    updates: (after.upd - counts.upd) / n,
    hot: (after.hot - counts.hot) / n,
    deletes: (after.del - counts.del) / n,
    graphileRows: (after.gw - counts.gw) / n,
    indexEntries: Number(wal.rows[0]!.entries) / n,
    walBytes: Number(wal.rows[0]!.bytes) / n,
    cpuMicros: cpu.postgresSeconds === null ? null : (cpu.postgresSeconds * 1e6) / n,
  };
}

/** Single-row jsonb inserts, each its own transaction, 32 connections. */
async function rawInsertPhase(ctx: BenchContext): Promise<Phase> {
  const pool = new pg.Pool({ connectionString: ctx.url, max: 32 });
  const payload = JSON.stringify({ kind: 'bench', input: { a: 1, b: 'two' } });
  const t = await throughput(32, ctx.seconds, async () => {
    await pool.query('insert into bench_raw (payload) values ($1)', [payload]);
  });
  return { ops: t.ops, close: () => pool.end() };
}

async function addJobPhase(ctx: BenchContext): Promise<Phase> {
  const pool = new pg.Pool({ connectionString: ctx.url, max: 32 });
  const payload = JSON.stringify({ a: 1, b: 'two' });
  const t = await throughput(32, ctx.seconds, async () => {
    await pool.query(`select graphile_worker.add_job('bench.noop', $1::json)`, [payload]);
  });
  return { ops: t.ops, close: () => pool.end() };
}

async function enqueuePhase(ctx: BenchContext): Promise<Phase> {
  const pool = await createDatabasePool(ctx.url, { maximumPoolSize: 32 });
  const t = await enqueueUngrouped({ ...ctx, db: pool }, 32, pool);
  return { ops: t.ops, close: () => pool.end() };
}

const open = async (meter: pg.Client, query: string) => (await meter.query<{ open: boolean }>(query)).rows[0]!.open;
async function until(meter: pg.Client, query: string): Promise<void> {
  while (await open(meter, query)) await sleep(50);
}

/** A plain Graphile runner with its local queue and batched completion (as the jobs section's baseline), warmed up. */
async function graphileJobs(ctx: BenchContext, meter: pg.Client) {
  const runner = await graphileNoopRunner(ctx, 8, true);
  /** Enqueues `count` jobs at once and waits for them to end; closes the enqueuing connection when told. */
  const drain = async (count: number) => {
    const client = new pg.Client({ connectionString: ctx.url });
    await client.connect();
    await client.query(
      `select graphile_worker.add_jobs(array(select ('bench.noop', '{"a":1,"b":"two"}'::json, null, null, null, null, null, null)::graphile_worker.job_spec from generate_series(1, $1)))`,
      [count],
    );
    await until(
      meter,
      `select exists (select 1 from graphile_worker.jobs where task_identifier = 'bench.noop') as open`,
    );
    return () => client.end();
  };
  await (await drain(200))();
  return { drain, stop: () => runner.stop() };
}

/** Our worker, default settings, warmed up; `drain` enqueues a batch of no-op jobs and waits for all to end. */
async function platformJobs(bench: BenchRun, meter: pg.Client) {
  const { ctx, config } = bench;
  const worker = await startWorker({ config, databaseUrl: ctx.url, logger: ctx.logger });
  const drain = async (count: number) => {
    const pool = await createDatabasePool(ctx.url, { maximumPoolSize: 1 });
    await enqueueBacklog({ ...ctx, db: pool }, count);
    await until(
      meter,
      `select exists (select 1 from jobs where status in ('queued', 'running', 'cancelling') and kind = 'diag.noop')
        or exists (select 1 from graphile_worker.jobs where task_identifier = 'diag.noop') as open`,
    );
    return () => pool.end();
  };
  await (await drain(200))();
  return { drain, stop: () => worker.stop() };
}

/** The api on a pool of its own, 32 sessions, warmed up by one uncounted load (as chat.ts). */
async function chatApi(bench: BenchRun) {
  const { ctx, config } = bench;
  const db: DatabasePool = await createDatabasePool(ctx.url, { maximumPoolSize: 34 });
  const hub = new JobEventHub(ctx.url, db, ctx.logger);
  await hub.start();
  const app = await buildApp({
    config: { ...config, logLevel: 'warn' },
    db,
    jobEvents: hub,
    jobs: new GroupCommitter(db),
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const port = (app.server.address() as { port: number }).port;
  const userId = (await db.oneFirst(
    sql.unsafe`insert into users (email) values ('cost-bench@bench.test') returning id`,
  )) as string;
  await db.query(sql.unsafe`update tenants set plan = 'enterprise' where id = ${ctx.tenantId}`);
  await db.query(
    sql.unsafe`insert into tenant_memberships (tenant_id, user_id, role) values (${ctx.tenantId}, ${userId}, 'admin')
      on conflict do nothing`,
  );
  const token = await signPlatformToken({ userId }, config.secrets.PLATFORM_JWT_SECRET, config.baseUrl);
  const agent = new (await import('node:http')).Agent({ keepAlive: true });
  const headers = { authorization: `Bearer ${token}`, 'x-tenant-id': ctx.tenantId };
  const sessions = await Promise.all(
    Array.from(
      { length: 32 },
      async () =>
        (JSON.parse((await postJson(agent, port, '/api/chat/sessions', headers, '{}')).body) as { id: string }).id,
    ),
  );
  agent.destroy();
  const load = { ports: [port], token, tenantId: ctx.tenantId, seconds: ctx.seconds, connections: 32, sessions };
  await chatSendLoad({ ...load, keyPrefix: `cost-${process.pid}-warm` });
  return {
    send: () => chatSendLoad({ ...load, keyPrefix: `cost-${process.pid}-sends` }),
    close: async () => {
      await app.close();
      await hub.stop();
      await db.end();
    },
  };
}

/** Runs every phase; autovacuum off meanwhile (see the top). */
export async function costFigures(bench: BenchRun): Promise<Record<string, Cost>> {
  const { ctx } = bench;
  const meter = new pg.Client({ connectionString: ctx.url });
  await meter.connect();
  await meter.query('create extension if not exists pg_walinspect');
  await meter.query('alter system set autovacuum = off');
  await meter.query('select pg_reload_conf()');
  const costs: Record<string, Cost> = {};
  try {
    await truncateQueues(ctx.db, true);
    costs['raw insert'] = await measure(ctx, meter, () => rawInsertPhase(ctx));
    costs['graphile add_job'] = await measure(ctx, meter, () => addJobPhase(ctx));
    await truncateQueues(ctx.db);
    costs['platform enqueue, 1 tx/request'] = await measure(ctx, meter, () => enqueuePhase(ctx));
    await truncateQueues(ctx.db);
    const graphile = await graphileJobs(ctx, meter);
    costs['graphile no-op job, batched'] = await measure(ctx, meter, async () => {
      const closeEnqueuer = await graphile.drain(JOBS);
      return {
        ops: JOBS,
        close: async () => {
          await closeEnqueuer();
          await graphile.stop();
        },
      };
    });
    await truncateQueues(ctx.db);
    const platform = await platformJobs(bench, meter);
    costs['platform no-op job'] = await measure(ctx, meter, async () => {
      const closeEnqueuer = await platform.drain(JOBS);
      return {
        ops: JOBS,
        close: async () => {
          await closeEnqueuer();
          await platform.stop();
        },
      };
    });
    await truncateQueues(ctx.db);
    const api = await chatApi(bench);
    costs['platform chat send (HTTP)'] = await measure(ctx, meter, async () => {
      const t = await api.send();
      return { ops: t.ops, close: api.close };
    });
    await truncateQueues(ctx.db);
  } finally {
    await meter.query('alter system reset autovacuum');
    await meter.query('select pg_reload_conf()');
    await meter.end();
  }
  return costs;
}

/** The section: prints the table, and adds the two ratio lines to the report. */
export async function costSection(bench: BenchRun): Promise<void> {
  const costs = await costFigures(bench);
  const header = ['per operation', 'ops', 'inserts', 'updates (HOT)', 'deletes', 'graphile rows', 'index entries'];
  const rows = Object.entries(costs).map(([name, c]) => [
    name,
    String(c.ops),
    c.inserts.toFixed(2),
    `${c.updates.toFixed(2)} (${c.hot.toFixed(2)})`,
    c.deletes.toFixed(2),
    c.graphileRows.toFixed(2),
    c.indexEntries.toFixed(2),
    Math.round(c.walBytes).toLocaleString('en-US'),
    c.cpuMicros === null ? '-' : c.cpuMicros.toFixed(0),
  ]);
  const all = [[...header, 'WAL bytes', 'PG CPU µs'], ...rows];
  const widths = all[0]!.map((_, i) => Math.max(...all.map((r) => r[i]!.length)));
  console.log('\ncost per operation (BENCH_ONLY=cost; rows from pg_stat_all_tables, index entries from the WAL)');
  for (const r of all)
    console.log(r.map((v, i) => (i === 0 ? v.padEnd(widths[i]!) : v.padStart(widths[i]!))).join('  '));
  console.log('');
  const enqueue = costs['platform enqueue, 1 tx/request']!;
  const addJob = costs['graphile add_job']!;
  bench.report.add(
    'WAL bytes per enqueue vs graphile add_job',
    enqueue.walBytes,
    'bytes',
    { name: 'graphile add_job', value: addJob.walBytes },
    '<= 1.5x',
  );
  const job = costs['platform no-op job']!;
  const graphileJob = costs['graphile no-op job, batched']!;
  if (job.cpuMicros !== null && graphileJob.cpuMicros !== null)
    bench.report.add(
      'PostgreSQL CPU per no-op job vs Graphile Worker alone',
      job.cpuMicros,
      'µs',
      { name: 'graphile, local queue + batched', value: graphileJob.cpuMicros },
      '<= 2.0x',
    );
}
