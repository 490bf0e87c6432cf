// `npm start` as a user runs it: no DATABASE_URL, so an embedded PostgreSQL
// in DATA_DIR/pg. A killed run leaves its postmaster behind; the next start
// recovers and reuses the data. SIGTERM stops api, worker and database.
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import path from 'node:path';
import t from 'tap';
import { legacyRelocatedDirectory, processDataDirectory } from '../../ops/embedded-postgres-cluster.ts';
import { testEnv } from '../helpers/config.ts';
import { waitForOutput } from '../helpers/wait.ts';
import { spawnEntry } from '../helpers/worker.ts';


/** A live postgres process whose data directory is DATA_DIR/pg (named by path, or by its cwd when run as root). */
function postmasterRunning(dataDir: string): boolean {
  const cluster = path.join(dataDir, 'pg');
  return readdirSync('/proc').filter((name) => /^\d+$/.test(name)).some((pid) => {
    try {
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      return cmdline[0]!.endsWith('postgres') && processDataDirectory(Number(pid), cmdline) === cluster;
    } catch {
      return false; // gone meanwhile
    }
  });
}

const dataDir = mkdtempSync(path.join(process.env.TEST_SCRATCH_DIR!, 'all-in-one-'));
chmodSync(dataDir, 0o755);
const env = () => {
  const e = testEnv('unused', { DATA_DIR: dataDir, LOG_LEVEL: 'info' });
  delete (e as Record<string, string | undefined>).DATABASE_URL;
  return e;
};

t.test('npm start serves the platform on an embedded PostgreSQL and survives a kill', async (t) => {
  const first = spawnEntry(t, 'ops/start.ts', env());
  const [, base1] = await waitForOutput(first, /"url":"(http:\/\/127\.0\.0\.1:\d+)".*"platform ready"/);
  t.equal((await fetch(`${base1}/readyz`)).status, 200, 'ready on a fresh data directory');

  first.child.kill('SIGKILL'); // no chance to stop the database
  await first.exited;
  t.ok(postmasterRunning(dataDir), 'the killed run left its postmaster behind');

  const second = spawnEntry(t, 'ops/start.ts', env());
  const [, base2] = await waitForOutput(second, /"url":"(http:\/\/127\.0\.0\.1:\d+)".*"platform ready"/);
  t.match(second.output(), /stopping a postmaster left running by a previous process/);
  t.notMatch(second.output(), /creating a new cluster/, 'the data directory was reused');
  t.equal((await fetch(`${base2}/readyz`)).status, 200);

  second.child.kill('SIGTERM');
  t.equal(await second.exited, 0, 'clean exit');
  t.match(second.output(), /platform stopped/);
  t.notOk(postmasterRunning(dataDir), 'the database was stopped too');
});

t.test('a taken port is reported as such', async (t) => {
  const blocker = createServer();
  await new Promise<void>((r) => blocker.listen(0, '127.0.0.1', () => r()));
  t.teardown(() => blocker.close());
  const port = (blocker.address() as { port: number }).port;
  const p = spawnEntry(t, 'ops/start.ts', { ...env(), EMBEDDED_PG_PORT: String(port), LOG_LEVEL: 'error' });
  t.equal(await p.exited, 1);
  t.match(p.output(), new RegExp(`port ${port} on 127\\.0\\.0\\.1 is already in use`));
});

const asRoot = { skip: process.getuid?.() !== 0 && 'only as root (PostgreSQL then runs as the postgres user)' };

t.test('a DATA_DIR behind a directory the postgres user cannot enter holds the cluster itself', asRoot, async (t) => {
  const closed = mkdtempSync(path.join(process.env.TEST_SCRATCH_DIR!, 'closed-')); // mode 0700
  const dataDir = path.join(closed, 'data');
  const closedEnv = { ...env(), DATA_DIR: dataDir };
  const first = spawnEntry(t, 'ops/start.ts', closedEnv);
  const [, base] = await waitForOutput(first, /"url":"(http:\/\/127\.0\.0\.1:\d+)".*"platform ready"/);
  t.ok(existsSync(path.join(dataDir, 'pg', 'PG_VERSION')), 'the cluster is DATA_DIR/pg');
  t.equal(statSync(closed).mode & 0o777, 0o700, 'nothing above DATA_DIR was opened up');
  t.ok(postmasterRunning(dataDir));

  // An ops command uses the running server's cluster, never a new one.
  const create = spawnEntry(t, 'ops/accounts.ts', closedEnv, { args: ['--email', 'root-dir@example.test'], stdin: 'a long enough password\n' });
  t.equal(await create.exited, 0, create.output());
  t.notMatch(create.output(), /creating a new cluster/);
  first.child.kill('SIGTERM');
  t.equal(await first.exited, 0);

  // Same DATA_DIR again: same data.
  const second = spawnEntry(t, 'ops/start.ts', closedEnv);
  const [, base2] = await waitForOutput(second, /"url":"(http:\/\/127\.0\.0\.1:\d+)".*"platform ready"/);
  t.notMatch(second.output(), /creating a new cluster/);
  const login = await fetch(`${base2}/api/auth/login`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email: 'root-dir@example.test', password: 'a long enough password' }),
  });
  t.equal(login.status, 200, 'the account made by the ops command is there after a restart');
  t.not(base, '');
  second.child.kill('SIGTERM');
  t.equal(await second.exited, 0);
});

t.test('a cluster an earlier version kept in the shared place moves back into DATA_DIR', asRoot, async (t) => {
  const made = mkdtempSync(path.join(process.env.TEST_SCRATCH_DIR!, 'legacy-'));
  chmodSync(made, 0o755);
  const firstDir = path.join(made, 'first');
  const start = spawnEntry(t, 'ops/start.ts', { ...env(), DATA_DIR: firstDir });
  await waitForOutput(start, /"platform ready"/);
  start.child.kill('SIGTERM');
  t.equal(await start.exited, 0);
  // Lay it out as the old relocation did: the cluster under the shared root, keyed by DATA_DIR/pg.
  const dataDir = path.join(made, 'second');
  const legacy = legacyRelocatedDirectory(path.join(dataDir, 'pg'));
  t.teardown(() => rmSync(legacy, { recursive: true, force: true }));
  mkdirSync(path.dirname(legacy), { recursive: true });
  mkdirSync(dataDir);
  renameSync(path.join(firstDir, 'pg'), legacy);
  renameSync(path.join(firstDir, 'pg.credentials.json'), path.join(dataDir, 'pg.credentials.json'));

  const again = spawnEntry(t, 'ops/start.ts', { ...env(), DATA_DIR: dataDir });
  await waitForOutput(again, /"platform ready"/);
  t.match(again.output(), /moved the cluster an earlier version kept in a shared place back into DATA_DIR/);
  t.notMatch(again.output(), /creating a new cluster/);
  t.notOk(existsSync(legacy));
  again.child.kill('SIGTERM');
  t.equal(await again.exited, 0);
});

t.test('a cluster directory owned by someone else stops the start with the fix', asRoot, async (t) => {
  const dataDir = mkdtempSync(path.join(process.env.TEST_SCRATCH_DIR!, 'foreign-'));
  chmodSync(dataDir, 0o755);
  // A cluster that belongs to root (copied in by hand, say): PostgreSQL would refuse it.
  mkdirSync(path.join(dataDir, 'pg'));
  writeFileSync(path.join(dataDir, 'pg', 'PG_VERSION'), '18\n');
  const p = spawnEntry(t, 'ops/start.ts', { ...env(), DATA_DIR: dataDir, LOG_LEVEL: 'error' });
  t.equal(await p.exited, 1);
  t.match(p.output(), new RegExp(`${path.join(dataDir, 'pg').replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} belongs to uid 0`));
  t.match(p.output(), /chown -R postgres:postgres/);
});

t.test('a DATA_DIR/pg holding something else is refused, not deleted', async (t) => {
  const dataDir = mkdtempSync(path.join(process.env.TEST_SCRATCH_DIR!, 'occupied-'));
  chmodSync(dataDir, 0o755);
  mkdirSync(path.join(dataDir, 'pg'));
  writeFileSync(path.join(dataDir, 'pg', 'notes.txt'), 'mine\n');
  const p = spawnEntry(t, 'ops/start.ts', { ...env(), DATA_DIR: dataDir, LOG_LEVEL: 'error' });
  t.equal(await p.exited, 1);
  t.match(p.output(), /is not empty and holds no PostgreSQL cluster \(notes\.txt\)/);
  t.ok(existsSync(path.join(dataDir, 'pg', 'notes.txt')), 'nothing deleted');
});
