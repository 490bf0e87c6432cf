// `npm start` as a user runs it: no DATABASE_URL, so an embedded PostgreSQL
// in DATA_DIR/pg. A killed run leaves its postmaster behind; the next start
// recovers and reuses the data. SIGTERM stops api, worker and database.
import { chmodSync, mkdtempSync } from 'node:fs';
import { createServer } from 'node:net';
import path from 'node:path';
import t from 'tap';
import { testEnv } from '../helpers/config.ts';
import { postmasterRunning } from '../helpers/postmaster.ts';
import { waitForOutput } from '../helpers/wait.ts';
import { spawnEntry } from '../helpers/worker.ts';


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
