// An api process killed and restarted while websocket clients follow jobs:
// clients reconnect and read every final state. The api is a real child
// process (SIGKILL: no close frames, no cleanup), the worker keeps running.
import t from 'tap';
import { z } from 'zod';
import { freePort } from '../../../../ops/embedded-postgres.ts';
import { sql } from '../../../../core/db/pool.ts';
import { testEnv } from '../../../helpers/config.ts';
import { createTestDatabase, testPool } from '../../../helpers/db.ts';
import { createMember, enqueue } from '../../../helpers/fixtures.ts';
import { waitFor, waitForOutput } from '../../../helpers/wait.ts';
import { spawnEntry, startTestWorker } from '../../../helpers/worker.ts';
import { FollowingClient } from '../../../helpers/ws.ts';

const databaseUrl = await createTestDatabase(t);
const db = await testPool(t, databaseUrl);

t.test(
  'An api process killed and restarted while websocket clients follow jobs: clients reconnect and read every final state',
  async (t) => {
    const port = await freePort();
    const env = testEnv(databaseUrl, { PORT: String(port), LOG_LEVEL: 'info' });
    const startApi = async () => {
      const api = spawnEntry(t, 'api/server.ts', env);
      await waitForOutput(api, /api listening/, 90_000);
      return api;
    };
    const first = await startApi();
    await startTestWorker(t, databaseUrl);

    // Two members of one tenant follow its jobs; a third follows her own.
    const alice = await createMember(db);
    const bob = await createMember(db);
    await db.query(
      sql.unsafe`insert into tenant_memberships (tenant_id, user_id, role) values (${alice.tenantId}, ${bob.userId}, 'viewer')`,
    );
    const carol = await createMember(db);
    // Lengths vary: some end while the api is down, some after it is back.
    const stepsOf = new Map<string, number>();
    const job = async (tenantId: string, steps: number, delayMs: number) => {
      const id = await enqueue(db, { kind: 'diag.steps', tenantId, input: { steps, delayMs } });
      stepsOf.set(id, steps);
      return id;
    };
    const jobsA = [await job(alice.tenantId, 3, 300), await job(alice.tenantId, 10, 800)];
    const jobsC = [await job(carol.tenantId, 4, 400), await job(carol.tenantId, 12, 800)];

    const url = `ws://127.0.0.1:${port}/api/ws`;
    const clients = [
      new FollowingClient(url, alice.token, jobsA),
      new FollowingClient(url, bob.token, jobsA),
      new FollowingClient(url, carol.token, jobsC),
    ];
    t.teardown(() => Promise.all(clients.map((c) => c.stop())));
    await Promise.all(clients.map((c) => c.until(() => c.connections === 1, 30_000, 'the first connection')));
    const running = async (id: string) =>
      (await db.oneFirst(sql.type(z.object({ status: z.string() }))`select status from jobs where id = ${id}`)) ===
      'running';
    // Kill it while the long jobs run.
    await waitFor('the long jobs to run', async () => (await running(jobsA[1]!)) && (await running(jobsC[1]!)), 60_000);
    first.child.kill('SIGKILL');
    await first.exited;

    await startApi();
    const finals = await Promise.all(clients.map((c) => c.allFinal(120_000)));

    for (const [i, client] of clients.entries()) {
      t.ok(client.connections >= 2, `client ${i} reconnected`);
      t.same(
        client.errors.filter((e) => e.code !== 'unavailable'),
        [],
        `client ${i}: no errors`,
      );
      for (const [jobId, job] of finals[i]!) {
        const version = await db.oneFirst(
          sql.type(z.object({ version: z.number() }))`select version from jobs where id = ${jobId}`,
        );
        t.equal(job.status, 'succeeded', `client ${i}: job ${jobId} succeeded`);
        t.equal(job.version, version, 'its last version');
        t.same(job.result, { steps: stepsOf.get(jobId), attempt: 1 });
      }
    }
  },
);
