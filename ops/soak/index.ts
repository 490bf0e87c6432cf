// npm run soak: the platform over time under a steady mixed load, with
// faults injected on a printed schedule, ending with invariant checks.
// Loopback only: everything it starts listens on 127.0.0.1.
import { z } from 'zod';
import { sql } from '../../core/db/pool.ts';
import { createLogger } from '../../core/logger.ts';
import { commandLine, usageError } from '../../core/process/command-line.ts';
import { AgentWorkload } from './agents.ts';
import { ChatWorkload } from './chat.ts';
import { SoakClient } from './client.ts';
import { faultSchedule, runFault, type Fault } from './faults.ts';
import { Followers } from './followers.ts';
import { checkInvariants, type MemorySample, type Window } from './invariants.ts';
import { SoakPlatform } from './platform.ts';
import { seedAgents, seedTenants } from './seed.ts';

const USAGE = `
usage: npm run soak -- --minutes N [--faults] [--rate R] [--seed S]
Runs 2 api and 2 worker processes on one PostgreSQL (embedded in a scratch
directory, or DATABASE_URL's) for N minutes (decimals allowed) under a steady
load of R chat sends a second (default 4) across 8 tenants and 16 sessions,
with websocket followers and pollers, and Agent API mutations with
Idempotency-Keys. --faults injects, on a schedule it prints: a worker and an
api killed (SIGKILL), a worker stopped (SIGSTOP) past its heartbeat, PostgreSQL
restarted (fast, then immediate shutdown; embedded only) and the LISTEN
connections dropped. At the end it checks the invariants, prints each with
its count, and exits 1 if one was violated.
`;

const values = commandLine(USAGE, { minutes: { type: 'string' }, faults: { type: 'boolean' }, rate: { type: 'string' }, seed: { type: 'string' } });
const minutes = Number(values.minutes);
if (!values.minutes || !(minutes > 0 && minutes <= 24 * 60)) usageError(USAGE, '--minutes must be a number of minutes above 0 (at most a day)');
const rate = values.rate === undefined ? 4 : Number(values.rate);
if (!(rate > 0 && rate <= 500)) usageError(USAGE, '--rate must be sends per second, above 0 and at most 500');
let seed = values.seed === undefined ? 1 : Number(values.seed);
if (!Number.isInteger(seed)) usageError(USAGE, '--seed must be an integer');

/** Seeded, so a run's choices (tenants, sessions, replays) can be repeated. */
function random(): number {
  seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
  return seed / 2 ** 31;
}

const say = (line: string) => process.stdout.write(`${line}\n`);
const logger = createLogger(process.env.LOG_LEVEL ?? 'warn', 'soak');
const platform = new SoakPlatform(logger);
let exitCode = 1;
const stop = () => void platform.stop().finally(() => process.exit(130));
process.once('SIGINT', stop);
process.once('SIGTERM', stop);

try {
  const durationMs = minutes * 60_000;
  await platform.start({ databaseUrl: process.env.DATABASE_URL, turnSeconds: 1 });
  const client = new SoakClient(() => platform.livePorts());
  const tenants = await seedTenants(platform, client, 8, 2);
  const agentList = await seedAgents(platform, client, 4);
  const followers = new Followers(() => platform.livePorts());
  const chat = new ChatWorkload(client, (tenant, sent) => {
    if (random() < 0.6) followers.follow(tenant, sent.jobId);
  });
  const agents = new AgentWorkload(client);
  say(`soak: ${minutes} min, ${rate} sends/s, 2 apis (ports ${platform.apis.map((a) => a.port).join(', ')}), 2 workers, PostgreSQL ${platform.ownsDatabase ? 'embedded' : 'of DATABASE_URL'}`);

  const started = Date.now();
  const faults: Fault[] = values.faults ? faultSchedule(durationMs, platform.ownsDatabase) : [];
  for (const f of faults) say(`  fault at ${(f.atMs / 1000).toFixed(0)} s: ${f.label}`);
  const outages: Window[] = [];
  const memory: MemorySample[] = [];
  const sizesAtStart = await tableSizes(platform);

  // The load: sends at the rate across tenants and sessions; an agent mutation every other tick.
  const tickMs = 1000 / rate;
  let ticks = 0;
  const load = setInterval(() => {
    const tenant = tenants[Math.floor(random() * tenants.length)]!;
    chat.send(tenant, tenant.sessions[Math.floor(random() * tenant.sessions.length)]!, random);
    if (++ticks % 2 === 0) agents.mutate(agentList[Math.floor(random() * agentList.length)]!, random);
  }, tickMs);
  const sampler = setInterval(() => memory.push({ at: Date.now(), mb: platform.memory() }), 5_000);
  const pending = faults.map(async (fault) => {
    await new Promise((r) => setTimeout(r, fault.atMs));
    const window = await runFault(platform, fault);
    say(`  ${((Date.now() - started) / 1000).toFixed(0)} s: ${fault.label} — ${window.detail}`);
    if (window.outage) outages.push(window.outage);
  });
  await new Promise((r) => setTimeout(r, durationMs));
  clearInterval(load);
  await Promise.all(pending);
  say(`soak: load stopped after ${((Date.now() - started) / 1000).toFixed(0)} s; waiting for every answer and job`);

  await waitForQuiet(platform, followers, 120_000);
  await chat.settle();
  await agents.settle();
  clearInterval(sampler);
  memory.push({ at: Date.now(), mb: platform.memory() });
  followers.close();

  const invariants = await checkInvariants({ db: platform.db, chat, agents, followers, client, outages, memory, warmUpUntil: started + Math.max(30_000, durationMs * 0.2) });
  const sizesAtEnd = await tableSizes(platform);
  say('');
  say(`answers by status: ${[...client.statuses].sort().map(([k, v]) => `${k} ${v}`).join(', ')}`);
  say(`chat sends accepted ${chat.sent.length}, never answered ${[...chat.refused.values()].reduce((a, b) => a + b, 0)}; agent mutations ${agents.mutations.length}`);
  say(`largest tables at start → end: ${sizesAtEnd.slice(0, 6).map(([t, mb]) => `${t} ${(sizesAtStart.find(([s]) => s === t)?.[1] ?? 0).toFixed(1)}→${mb.toFixed(1)} MiB`).join(', ')}`);
  say(`dead rows and vacuums at the end: ${(await vacuumState(platform)).join(', ')}`);
  say('');
  say('| invariant | checked | violations |');
  say('|---|---:|---:|');
  for (const inv of invariants) say(`| ${inv.name}${inv.note ? ` (${inv.note})` : ''} | ${inv.checked} | ${inv.violations.length} |`);
  const violated = invariants.filter((i) => i.violations.length > 0);
  for (const inv of violated) {
    say(`\nviolated: ${inv.name}`);
    for (const example of inv.violations.slice(0, 5)) say(`  ${example}`);
  }
  say(violated.length === 0 ? '\ninvariants: all held' : `\ninvariants: ${violated.length} violated (${violated.map((i) => i.name).join('; ')})`);
  exitCode = violated.length === 0 ? 0 : 1;
} catch (error) {
  process.stderr.write(`soak: ${(error as Error).stack ?? error}\n`);
  exitCode = 1;
} finally {
  await platform.stop(exitCode !== 0);
  if (exitCode !== 0) process.stderr.write(`soak: the processes' logs are in ${platform.logs}, the database (stopped) in ${platform.scratch}/pg\n`);
}
process.exit(exitCode);

/** Waits until every job is final and every followed job's final state has arrived. */
async function waitForQuiet(platform: SoakPlatform, followers: Followers, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let nextReport = Date.now() + 10_000;
  while (Date.now() < deadline) {
    const open = await platform.db.oneFirst(sql.type(z.object({ n: z.number() }))`
      select count(*)::int as n from jobs where status not in ('succeeded', 'failed', 'cancelled')`).catch(() => -1);
    if (open === 0 && followers.pending() === 0) return;
    if (Date.now() >= nextReport) {
      say(`  waiting: ${open} jobs not final, ${followers.pending()} followed jobs without their final state`);
      nextReport = Date.now() + 10_000;
    }
    await new Promise((r) => setTimeout(r, 500));
  }
}

async function tableSizes(platform: SoakPlatform): Promise<Array<[string, number]>> {
  const rows = await platform.db.any(sql.type(z.object({ name: z.string(), mb: z.number() }))`
    select relname as name, pg_total_relation_size(relid)::float8 / 1048576 as mb from pg_stat_user_tables order by 2 desc`);
  return rows.map((r) => [r.name, r.mb]);
}

/** Dead rows left for vacuum, autovacuum runs and index share of the busiest tables: bloat under the load. */
async function vacuumState(platform: SoakPlatform): Promise<string[]> {
  const rows = await platform.db.any(sql.type(z.object({ name: z.string(), live: z.number(), dead: z.number(), vacuums: z.number(), index_mb: z.number() }))`
    select relname as name, n_live_tup::int as live, n_dead_tup::int as dead, autovacuum_count::int as vacuums,
      pg_indexes_size(relid)::float8 / 1048576 as index_mb
    from pg_stat_user_tables order by n_tup_ins + n_tup_upd + n_tup_del desc limit 6`);
  return rows.map((r) => `${r.name} ${r.live} live/${r.dead} dead, ${r.vacuums} autovacuums, indexes ${r.index_mb.toFixed(1)} MiB`);
}
