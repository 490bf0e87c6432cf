// The api and workers as separate processes on a laptop, as docs/operations.md shows:
// `npm run db` runs DATA_DIR's embedded PostgreSQL on its own, and
// `npm run start:api` / `npm run start:worker` with DATABASE_URL unset use
// it, and ride out its restart. A second owner of the DATA_DIR is refused,
// naming the first.
import { chmodSync, mkdtempSync, readFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { z } from 'zod';
import { createDatabasePool, sql } from '../../core/db/pool.ts';
import { testEnv } from '../helpers/config.ts';
import { createMember, enqueue } from '../helpers/fixtures.ts';
import { postmasterRunning } from '../helpers/postmaster.ts';
import { waitFor, waitForOutput } from '../helpers/wait.ts';
import { spawnEntry } from '../helpers/worker.ts';

const dataDir = mkdtempSync(path.join(process.env.TEST_SCRATCH_DIR!, 'separate-'));
chmodSync(dataDir, 0o755);
const env = (dir = dataDir) => {
  const e = testEnv('unused', { DATA_DIR: dir, LOG_LEVEL: 'info' });
  delete (e as Record<string, string | undefined>).DATABASE_URL;
  return e;
};

t.test('npm run db, then start:api and start:worker on it; Ctrl-C stops each', async (t) => {
  const db = spawnEntry(t, 'ops/db.ts', env());
  await waitForOutput(db, /embedded postgres ready; in other terminals/);
  const api = spawnEntry(t, 'api/server.ts', env());
  const worker = spawnEntry(t, 'workers/runner.ts', env());
  const [, base] = await waitForOutput(api, /"url":"(http:\/\/127\.0\.0\.1:\d+)".*"api listening"/);
  t.match(
    api.output(),
    /"server":"npm run db \(pid \d+, PostgreSQL pid \d+ on 127\.0\.0\.1:\d+\)","msg":"using the embedded PostgreSQL of DATA_DIR"/,
  );
  t.equal((await fetch(`${base}/readyz`)).status, 200);

  // A job reaches the worker process through the shared database.
  const pgFile = readFileSync(path.join(dataDir, 'pg', 'postmaster.pid'), 'utf8').split('\n');
  const { password } = JSON.parse(readFileSync(path.join(dataDir, 'pg.credentials.json'), 'utf8')) as {
    password: string;
  };
  const pool = await createDatabasePool(
    `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${pgFile[3]}/platform`,
    { maximumPoolSize: 2 },
  );
  t.teardown(() => pool.end());
  const member = await createMember(pool);
  const jobId = await enqueue(pool, {
    kind: 'diag.steps',
    tenantId: member.tenantId,
    input: { steps: 2, delayMs: 10 },
  });
  await waitFor('the worker to finish the job', async () =>
    (await pool.oneFirst(sql.type(z.object({ status: z.string() }))`select status from jobs where id = ${jobId}`)) ===
    'succeeded'
      ? true
      : null,
  );
  // Its log line may reach us a moment after the row says succeeded.
  t.ok(await waitForOutput(worker, new RegExp(`"jobId":"${jobId}"`)), 'the worker process ran it');

  // The DATA_DIR has its owner: a second `npm run db` and an `npm start` are refused, naming it.
  for (const entry of ['ops/db.ts', 'ops/start.ts']) {
    const second = spawnEntry(t, entry, env());
    t.equal(await second.exited, 1, `${entry} refused`);
    t.match(
      second.output(),
      new RegExp(
        `is in use by npm run db \\(pid ${db.child.pid}, PostgreSQL pid \\d+ on 127\\.0\\.0\\.1:${pgFile[3]}\\)`,
      ),
      entry,
    );
  }

  await pool.end();

  // The database goes away under them and comes back on the same port: they carry on.
  db.child.kill('SIGINT');
  t.equal(await db.exited, 0);
  await waitFor('the api to answer 503', async () => ((await fetch(`${base}/readyz`)).status === 503 ? true : null));
  const again = spawnEntry(t, 'ops/db.ts', env());
  await waitForOutput(again, /embedded postgres ready/);
  t.equal(
    readFileSync(path.join(dataDir, 'pg', 'postmaster.pid'), 'utf8').split('\n')[3],
    pgFile[3],
    'the same port as before',
  );
  await waitFor(
    'the api to be ready again',
    async () => ((await fetch(`${base}/readyz`)).status === 200 ? true : null),
    60_000,
  );
  const pool2 = await createDatabasePool(
    `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${pgFile[3]}/platform`,
    { maximumPoolSize: 2 },
  );
  const jobAfter = await enqueue(pool2, {
    kind: 'diag.steps',
    tenantId: member.tenantId,
    input: { steps: 1, delayMs: 10 },
  });
  await waitFor(
    'the worker to run a job again',
    async () =>
      (await pool2.oneFirst(
        sql.type(z.object({ status: z.string() }))`select status from jobs where id = ${jobAfter}`,
      )) === 'succeeded'
        ? true
        : null,
    60_000,
  );
  await pool2.end();

  api.child.kill('SIGTERM');
  worker.child.kill('SIGTERM');
  t.equal(await api.exited, 0);
  t.equal(await worker.exited, 0);
  again.child.kill('SIGINT');
  t.equal(await again.exited, 0);
  t.match(again.output(), /embedded postgres stopped/);
  t.notOk(postmasterRunning(dataDir), 'the database stopped');
});

t.test('start:api without DATABASE_URL and without npm run db says what to do', async (t) => {
  const empty = mkdtempSync(path.join(process.env.TEST_SCRATCH_DIR!, 'separate-none-'));
  for (const entry of ['api/server.ts', 'workers/runner.ts']) {
    const p = spawnEntry(t, entry, env(empty));
    t.equal(await p.exited, 1, entry);
    t.match(
      p.output(),
      /DATABASE_URL: required for npm run start:(api|worker), or run `npm run db` in another terminal/,
    );
  }
});
