// `npm start` as a user runs it: no DATABASE_URL, so an embedded PostgreSQL
// in DATA_DIR/pg. A killed run leaves its postmaster behind; the next start
// recovers and reuses the data; a second start while one runs is refused.
// SIGTERM stops api, worker and database.
import { execFileSync } from 'node:child_process';
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

  // `ps ax | grep <DATA_DIR>` finds the server of a DATA_DIR (docs/operations.md says so).
  t.match(
    execFileSync('ps', ['ax', '-o', 'args'], { encoding: 'utf8' }),
    `agent_platform.data_dir=${path.join(dataDir, 'pg')}`,
  );

  // A second `npm start` on the same DATA_DIR refuses at once, naming the running one; the first keeps serving.
  const third = spawnEntry(t, 'ops/start.ts', env());
  t.equal(await third.exited, 1, 'the second start is refused');
  t.match(
    third.output(),
    new RegExp(
      `${path.join(dataDir, 'pg')} is in use by npm start \\(pid ${second.child.pid}, PostgreSQL pid \\d+ on 127\\.0\\.0\\.1:\\d+\\)\\. Stop that one first`,
    ),
  );
  t.notMatch(third.output(), /platform ready|embedded postgres/, 'nothing started');
  t.equal((await fetch(`${base2}/readyz`)).status, 200, 'the first still serves');

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
