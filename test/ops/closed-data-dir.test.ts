// The newcomer's machine where the postgres system user cannot enter the
// checkout (a 0700 home or mktemp directory), as root: `npm start` keeps its
// cluster in DATA_DIR/pg itself without opening anything above it, an ops
// command uses the running server, and a restart finds the same data.
import { existsSync, mkdtempSync, statSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { testEnv } from '../helpers/config.ts';
import { postmasterRunning } from '../helpers/postmaster.ts';
import { waitForOutput } from '../helpers/wait.ts';
import { spawnEntry } from '../helpers/worker.ts';

const env = () => {
  const e = testEnv('unused', { LOG_LEVEL: 'info' });
  delete (e as Record<string, string | undefined>).DATABASE_URL;
  return e;
};

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
  const create = spawnEntry(t, 'ops/accounts.ts', closedEnv, {
    args: ['--email', 'root-dir@example.test'],
    stdin: 'a long enough password\n',
  });
  t.equal(await create.exited, 0, create.output());
  t.notMatch(create.output(), /creating a new cluster/);
  first.child.kill('SIGTERM');
  t.equal(await first.exited, 0);

  // Same DATA_DIR again: same data.
  const second = spawnEntry(t, 'ops/start.ts', closedEnv);
  const [, base2] = await waitForOutput(second, /"url":"(http:\/\/127\.0\.0\.1:\d+)".*"platform ready"/);
  t.notMatch(second.output(), /creating a new cluster/);
  const login = await fetch(`${base2}/api/auth/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email: 'root-dir@example.test', password: 'a long enough password' }),
  });
  t.equal(login.status, 200, 'the account made by the ops command is there after a restart');
  t.not(base, '');
  second.child.kill('SIGTERM');
  t.equal(await second.exited, 0);
});
