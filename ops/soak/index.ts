// npm run soak: the platform over time under a steady mixed load, with
// faults injected on a printed schedule, ending with invariant checks.
// Loopback only: everything it starts listens on 127.0.0.1.
import { z } from 'zod';
import { sql } from '../../core/db/pool.ts';
import { createLogger } from '../../core/logger.ts';
import { commandLine, usageError } from '../../core/process/command-line.ts';
import { AgentWorkload } from './agents.ts';
import { BillingWorkload } from './billing.ts';
import { ChannelWorkload, type ChannelTenant } from './channels.ts';
import { ChatWorkload } from './chat.ts';
import { SoakClient } from './client.ts';
import { faultSchedule, runFault, type Fault } from './faults.ts';
import { Followers } from './followers.ts';
import { checkInvariants, type Window } from './invariants.ts';
import {
  memoryByMinute,
  memoryInvariant,
  sampleTables,
  tableGrowthInvariant,
  type MemorySample,
  type TableSample,
} from './invariants-growth.ts';
import { billingInvariants, channelInvariants, cronInvariant, cronLastExecution } from './invariants-integrations.ts';
import { logInvariant } from './invariants-logs.ts';
import { SoakPlatform } from './platform.ts';
import { HaCluster } from '../ha/cluster.ts';
import { missingHaPackages } from '../ha/packages.ts';
import {
  HA_FAULT_KINDS,
  measureSends,
  haFaultSchedule,
  recoveryReport,
  runHaFault,
  type HaFaultKind,
  type HaRecovery,
} from './ha.ts';
import { seedAgents, seedTenants } from './seed.ts';

const USAGE = `
usage: npm run soak -- --minutes N [--faults] [--rate R] [--seed S]
       npm run soak -- --ha [--minutes N] [--ha-faults K,K] [--ha-async] [--faults] [--rate R] [--seed S]
Runs 2 api and 2 worker processes on one PostgreSQL (embedded in a scratch
directory, or DATABASE_URL's) for N minutes (decimals allowed) under a steady
load of R chat sends a second (default 4) across 8 tenants and 16 sessions,
with websocket followers and pollers, Agent API mutations with
Idempotency-Keys, webhook-channel messages with replies to a local receiver,
and Stripe subscriptions from the billing sandbox (signed events, some
delivered twice); Graphile Worker's cron fires as usual. --faults injects, on a schedule it prints: a worker and an
api killed (SIGKILL), a worker stopped (SIGSTOP) past its heartbeat, PostgreSQL
restarted (fast, then immediate shutdown; embedded only) and the LISTEN
connections dropped. At the end it checks the invariants, prints each with
its count, and exits 1 if one was violated.
--ha runs the same load on a replicated PostgreSQL instead (etcd, three
Patroni members with synchronous replication, HAProxy to the primary; needs
Debian's patroni, etcd-server, haproxy and postgresql), 10 minutes unless
--minutes says otherwise, with its faults on the schedule: the primary's
machine lost, a switchover, a standby lost and back, etcd restarted
(--ha-faults picks some: ${HA_FAULT_KINDS.join(', ')}). It prints each
failover's time without a primary and to the first accepted send.
--ha-async turns synchronous replication off, to see what a failover loses
without it.
`;

const values = commandLine(USAGE, {
  minutes: { type: 'string' },
  faults: { type: 'boolean' },
  rate: { type: 'string' },
  seed: { type: 'string' },
  ha: { type: 'boolean' },
  'ha-faults': { type: 'string' },
  'ha-async': { type: 'boolean' },
});
const minutes = Number(values.minutes ?? (values.ha ? 10 : NaN));
if (!(minutes > 0 && minutes <= 24 * 60))
  usageError(USAGE, '--minutes must be a number of minutes above 0 (at most a day)');
const haKinds = (values['ha-faults']?.split(',').map((k) => k.trim()) ?? [...HA_FAULT_KINDS]) as HaFaultKind[];
if (haKinds.some((k) => !HA_FAULT_KINDS.includes(k)))
  usageError(USAGE, `--ha-faults takes ${HA_FAULT_KINDS.join(', ')}, separated by commas`);
if ((values['ha-faults'] || values['ha-async']) && !values.ha)
  usageError(USAGE, '--ha-faults and --ha-async need --ha');
const rate = values.rate === undefined ? 4 : Number(values.rate);
if (!(rate > 0 && rate <= 500)) usageError(USAGE, '--rate must be sends per second, above 0 and at most 500');
let seed = values.seed === undefined ? 1 : Number(values.seed);
if (!Number.isInteger(seed)) usageError(USAGE, '--seed must be an integer');
const missing = values.ha ? missingHaPackages() : [];
if (missing.length > 0) {
  // Said before anything starts: otherwise the first missing program ends the run in a spawn ENOENT.
  process.stderr.write(
    `soak --ha runs etcd, Patroni, HAProxy and PostgreSQL from Debian's packages; this machine lacks ${missing.join(', ')}.\n` +
      `Install them (as root): apt-get install ${missing.join(' ')}\n`,
  );
  process.exit(1);
}

/** Seeded, so a run's choices (tenants, sessions, replays) can be repeated. */
function random(): number {
  seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
  return seed / 2 ** 31;
}

const say = (line: string) => process.stdout.write(`${line}\n`);
const logger = createLogger(process.env.LOG_LEVEL ?? 'warn', 'soak');
const platform = new SoakPlatform(logger);
const cluster = values.ha ? new HaCluster({ synchronous: !values['ha-async'] }) : null;
let exitCode = 1;
const stop = () =>
  void platform
    .stop()
    .finally(() => cluster?.stop())
    .finally(() => process.exit(130));
process.once('SIGINT', stop);
process.once('SIGTERM', stop);

try {
  const durationMs = minutes * 60_000;
  if (cluster) {
    say('soak: starting the replicated PostgreSQL (etcd, 3 Patroni members, HAProxy)');
    await cluster.start();
  }
  await platform.start({ databaseUrl: cluster?.url ?? process.env.DATABASE_URL, turnSeconds: 1 });
  const client = new SoakClient(() => platform.livePorts());
  const tenants = await seedTenants(platform, client, 8, 2);
  const agentList = await seedAgents(platform, client, 4);
  const payers = await seedTenants(platform, client, 2, 0, 'free');
  const channels = new ChannelWorkload(client, random);
  const receiver = await channels.listen();
  const channelTenants: ChannelTenant[] = [];
  for (const [i, tenant] of tenants.slice(0, 3).entries())
    channelTenants.push(await channels.link(tenant, receiver, i + 1));
  const billing = new BillingWorkload(client, platform.db, platform.config.billing.stripe.webhookSecret, random);
  const followers = new Followers(() => platform.livePorts());
  const chat = new ChatWorkload(client, (tenant, sent) => {
    if (random() < 0.6) followers.follow(tenant, sent.jobId);
  });
  const agents = new AgentWorkload(client);
  const database = cluster
    ? `replicated (3 Patroni members, ${cluster.options.synchronous ? 'synchronous' : 'ASYNCHRONOUS'}, through HAProxy)`
    : platform.ownsDatabase
      ? 'embedded'
      : 'of DATABASE_URL';
  say(
    `soak: ${minutes} min, ${rate} sends/s (and a channel message every 4th tick), 2 apis (ports ${platform.apis.map((a) => a.port).join(', ')}), 2 workers, PostgreSQL ${database}`,
  );

  const started = Date.now();
  const faults: Fault[] = values.faults ? faultSchedule(durationMs, platform.ownsDatabase) : [];
  for (const f of faults) say(`  fault at ${(f.atMs / 1000).toFixed(0)} s: ${f.label}`);
  const haFaults = cluster ? haFaultSchedule(durationMs, haKinds) : [];
  for (const f of haFaults) say(`  fault at ${(f.atMs / 1000).toFixed(0)} s: ${f.label}`);
  const recoveries: HaRecovery[] = [];
  const outages: Window[] = [];
  const faultWindows: Window[] = [];
  const memory: MemorySample[] = [];
  const warmUpMs = Math.max(30_000, durationMs * 0.2);
  const warmUpUntil = started + warmUpMs;
  const tablesAtStart = await sampleTables(platform.db);
  let tablesAfterWarmUp: TableSample | null = null;
  const warmUp = setTimeout(
    () =>
      void sampleTables(platform.db).then(
        (t) => (tablesAfterWarmUp = t),
        () => undefined,
      ),
    warmUpUntil - Date.now(),
  );
  const cronFired = new Set<number>();
  const cronSampler = setInterval(
    () =>
      void cronLastExecution(platform.db).then(
        (at) => at !== null && cronFired.add(at),
        () => undefined,
      ),
    2_000,
  );
  billing.start(payers);

  // The load: sends at the rate across tenants and sessions; an agent mutation every other tick.
  const tickMs = 1000 / rate;
  let ticks = 0;
  const load = setInterval(() => {
    const tenant = tenants[Math.floor(random() * tenants.length)]!;
    chat.send(tenant, tenant.sessions[Math.floor(random() * tenant.sessions.length)]!, random);
    if (++ticks % 2 === 0) agents.mutate(agentList[Math.floor(random() * agentList.length)]!, random);
    if (ticks % 4 === 0) channels.send(channelTenants[Math.floor(random() * channelTenants.length)]!);
  }, tickMs);
  const sampler = setInterval(() => memory.push({ at: Date.now(), mb: platform.memory() }), 5_000);
  // One fault at a time, each at its time or once the one before it is over:
  // two PostgreSQL restarts overlapping on a slow machine would stop the
  // server the other one is still starting.
  const faultRun = (async () => {
    for (const fault of faults) {
      await new Promise((r) => setTimeout(r, Math.max(0, started + fault.atMs - Date.now())));
      const from = Date.now();
      const window = await runFault(platform, fault);
      faultWindows.push({ from, to: Date.now() });
      say(`  ${((Date.now() - started) / 1000).toFixed(0)} s: ${fault.label} — ${window.detail}`);
      if (window.outage) outages.push(window.outage);
    }
  })();
  // One HA fault at a time, each after the one before it recovered.
  const haRun = (async () => {
    for (const fault of haFaults) {
      await new Promise((r) => setTimeout(r, Math.max(0, started + fault.atMs - Date.now())));
      const { recovery, outage } = await runHaFault(cluster!, fault);
      recoveries.push(recovery);
      outages.push(outage);
      faultWindows.push(outage);
      say(`  ${((recovery.at - started) / 1000).toFixed(0)} s: ${fault.label} — ${recovery.detail}`);
    }
  })();
  // A fault that throws ends the soak with its stack (below), not as an unhandled rejection mid-run.
  for (const run of [faultRun, haRun]) run.catch(() => undefined);
  await new Promise((r) => setTimeout(r, durationMs));
  clearInterval(load);
  await Promise.all([faultRun, haRun]);
  say(`soak: load stopped after ${((Date.now() - started) / 1000).toFixed(0)} s; waiting for every answer and job`);

  const loadWindow: Window = { from: started, to: Date.now() };
  clearTimeout(warmUp);
  clearInterval(cronSampler);
  await Promise.all([chat.settle(), agents.settle(), channels.settle(), billing.settle()]);
  await waitForQuiet(platform, followers, 120_000);
  clearInterval(sampler);
  memory.push({ at: Date.now(), mb: platform.memory() });
  followers.close();
  channels.close();

  const tablesAtEnd = await sampleTables(platform.db);
  const invariants = [
    ...(await checkInvariants({ db: platform.db, chat, agents, followers, client, outages })),
    ...(await channelInvariants(platform.db, channels)),
    ...(await billingInvariants(
      platform.db,
      billing,
      payers.map((p) => p.tenantId),
    )),
    await cronInvariant(platform.db, cronFired, loadWindow, faultWindows),
    memoryInvariant(memory, warmUpMs),
    tableGrowthInvariant(tablesAfterWarmUp ?? tablesAtStart, tablesAtEnd),
    logInvariant(platform.logs),
    {
      name: 'no platform process exited on its own',
      checked: platform.apis.length + platform.workers.length,
      violations: platform.unexpectedExits,
    },
  ];
  say('');
  say(
    `answers by status: ${[...client.statuses]
      .sort()
      .map(([k, v]) => `${k} ${v}`)
      .join(', ')}`,
  );
  say(
    `chat sends accepted ${chat.sent.length}, never answered ${[...chat.refused.values()].reduce((a, b) => a + b, 0)}; agent mutations ${agents.mutations.length}; channel messages ${channels.inbound.length}, replies received ${channels.arrivals.length}; plan changes ${[...billing.transitions.values()].reduce((a, b) => a + b, 0)}`,
  );
  const largest = [...tablesAtEnd.tables].sort((a, b) => b[1].mb - a[1].mb).slice(0, 6);
  say(
    `largest tables at start → end: ${largest.map(([t, end]) => `${t} ${(tablesAtStart.tables.get(t)?.mb ?? 0).toFixed(1)}→${end.mb.toFixed(1)} MiB`).join(', ')}`,
  );
  say(`dead rows and vacuums at the end: ${(await vacuumState(platform)).join(', ')}`);
  say(`resident memory (MiB) at each minute: ${memoryByMinute(memory).join('; ')}`);
  if (cluster) {
    measureSends(recoveries, chat.sent);
    say('');
    for (const line of recoveryReport(recoveries)) say(line);
  }
  say('');
  say('| invariant | checked | violations |');
  say('|---|---:|---:|');
  for (const inv of invariants)
    say(`| ${inv.name}${inv.note ? ` (${inv.note})` : ''} | ${inv.checked} | ${inv.violations.length} |`);
  const violated = invariants.filter((i) => i.violations.length > 0);
  for (const inv of violated) {
    say(`\nviolated: ${inv.name}`);
    for (const example of inv.violations.slice(0, 5)) say(`  ${example}`);
  }
  say(
    violated.length === 0
      ? '\ninvariants: all held'
      : `\ninvariants: ${violated.length} violated (${violated.map((i) => i.name).join('; ')})`,
  );
  exitCode = violated.length === 0 ? 0 : 1;
} catch (error) {
  process.stderr.write(`soak: ${(error as Error).stack ?? error}\n`);
  exitCode = 1;
} finally {
  await platform.stop(exitCode !== 0);
  await cluster?.stop(exitCode !== 0);
  if (exitCode !== 0)
    process.stderr.write(
      `soak: the processes' logs are in ${platform.logs}, the database (stopped) in ${cluster ? cluster.dir : `${platform.scratch}/pg`}\n`,
    );
}
process.exit(exitCode);

/** Waits until every job is final and every followed job's final state has arrived. */
async function waitForQuiet(platform: SoakPlatform, followers: Followers, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let nextReport = Date.now() + 10_000;
  while (Date.now() < deadline) {
    const open = await platform.db
      .oneFirst(sql.type(z.object({ n: z.number() }))`
      select count(*)::int as n from jobs where status not in ('succeeded', 'failed', 'cancelled')`)
      .catch(() => -1);
    if (open === 0 && followers.pending() === 0) return;
    if (Date.now() >= nextReport) {
      say(`  waiting: ${open} jobs not final, ${followers.pending()} followed jobs without their final state`);
      nextReport = Date.now() + 10_000;
    }
    await new Promise((r) => setTimeout(r, 500));
  }
}

/** Dead rows left for vacuum, autovacuum runs and index share of the busiest tables: bloat under the load. */
async function vacuumState(platform: SoakPlatform): Promise<string[]> {
  const rows = await platform.db.any(sql.type(
    z.object({ name: z.string(), live: z.number(), dead: z.number(), vacuums: z.number(), index_mb: z.number() }),
  )`
    select relname as name, n_live_tup::int as live, n_dead_tup::int as dead, autovacuum_count::int as vacuums,
      pg_indexes_size(relid)::float8 / 1048576 as index_mb
    from pg_stat_user_tables order by n_tup_ins + n_tup_upd + n_tup_del desc limit 6`);
  return rows.map(
    (r) => `${r.name} ${r.live} live/${r.dead} dead, ${r.vacuums} autovacuums, indexes ${r.index_mb.toFixed(1)} MiB`,
  );
}
