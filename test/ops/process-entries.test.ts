// The process entries as an operator runs them: clear refusals for bad
// configuration and an unmigrated database, a clean stop on SIGTERM.
import t from 'tap';
import { z } from 'zod';
import { createTestDatabase } from '../helpers/db.ts';
import { testEnv } from '../helpers/config.ts';
import { waitForOutput } from '../helpers/wait.ts';
import { spawnEntry } from '../helpers/worker.ts';

t.test('a bad configuration value stops the process with a message naming it', async (t) => {
  const p = spawnEntry(t, 'api/server.ts', { ...testEnv('postgres://localhost/x'), PORT: 'eighty' });
  t.equal(await p.exited, 1);
  t.match(p.output(), /Invalid configuration:\n\s+PORT:/);
});

t.test('start:api and start:worker need DATABASE_URL', async (t) => {
  for (const entry of ['api/server.ts', 'workers/runner.ts']) {
    const env = testEnv('postgres://unused/x');
    delete (env as Record<string, string | undefined>).DATABASE_URL;
    const p = spawnEntry(t, entry, env);
    t.equal(await p.exited, 1, entry);
    t.match(p.output(), /DATABASE_URL: required for npm run start:(api|worker)/);
  }
});

t.test('in production an unmigrated database is refused with what to do', async (t) => {
  const url = await createTestDatabase(t, { empty: true });
  for (const entry of ['api/server.ts', 'workers/runner.ts']) {
    const p = spawnEntry(t, entry, testEnv(url, { NODE_ENV: 'production', LOG_LEVEL: 'error' }));
    t.equal(await p.exited, 1, entry);
    t.match(p.output(), /schema is not current \(missing: 0001_engine\.sql.*\)\. Run `npm run migrate`/);
    t.notMatch(p.output(), /at .*\.ts:\d+/, 'no stack trace for an expected refusal');
    t.equal(
      p.output().match(/schema is not current/g)?.length,
      1,
      'said once (its log line, not a second copy on stderr)',
    );
  }
});

t.test('the api process serves, reports ready, and stops cleanly on SIGTERM', async (t) => {
  const url = await createTestDatabase(t);
  const p = spawnEntry(t, 'api/server.ts', testEnv(url, { LOG_LEVEL: 'info' }));
  const [, base] = await waitForOutput(p, /"url":"(http:\/\/127\.0\.0\.1:\d+)"/);
  const ready = await fetch(`${base}/readyz`);
  t.equal(ready.status, 200);
  t.same(await ready.json(), {
    status: 'ready',
    checks: { database: 'ok', migrations: 'current', jobEvents: 'listening', shuttingDown: false },
  });
  p.child.kill('SIGTERM');
  t.equal(await p.exited, 0, 'graceful exit');
  t.match(p.output(), /"signal":"SIGTERM","msg":"shutting down"/);
  t.notMatch(p.output(), /PLATFORM_JWT_SECRET|BwcHBwcH/, 'no secret in the logs');
});

t.test('/readyz says not ready, and why, on an unmigrated database', async (t) => {
  const { buildTestApp } = await import('../helpers/app.ts');
  const url = await createTestDatabase(t, { empty: true });
  const { app } = await buildTestApp(t, url);
  const res = await app.inject('/readyz');
  t.equal(res.statusCode, 503);
  t.match(res.json(), {
    status: 'not_ready',
    checks: { migrations: 'pending' },
    pendingMigrations: ['0001_engine.sql'],
  });
  t.equal((await app.inject('/healthz')).statusCode, 200, 'still alive');
});

t.test(
  "Ctrl-C delivered twice (the terminal's and npm's) is one graceful stop: the running job finishes",
  async (t) => {
    const { createDatabasePool, sql } = await import('../../core/db/pool.ts');
    const { createMember, enqueue } = await import('../helpers/fixtures.ts');
    const { waitFor } = await import('../helpers/wait.ts');
    const url = await createTestDatabase(t);
    const db = await createDatabasePool(url, { maximumPoolSize: 2 });
    t.teardown(() => db.end());
    const member = await createMember(db);
    const p = spawnEntry(t, 'workers/runner.ts', testEnv(url, { LOG_LEVEL: 'info' }));
    await waitForOutput(p, /worker started/);
    const jobId = await enqueue(db, {
      kind: 'diag.steps',
      tenantId: member.tenantId,
      input: { steps: 6, delayMs: 250 },
    });
    const status = () =>
      db.oneFirst(sql.type(z.object({ status: z.string() }))`select status from jobs where id = ${jobId}`);
    await waitFor('the job to run', async () => (await status()) === 'running');
    p.child.kill('SIGINT');
    await new Promise((resolve) => setTimeout(resolve, 20));
    p.child.kill('SIGINT');
    t.equal(await p.exited, 0, 'graceful exit, not the forced one');
    t.equal(await status(), 'succeeded', 'the job finished before the worker stopped');
    t.notMatch(p.output(), /second signal/);
    t.match(p.output(), /worker stopped/);
  },
);
