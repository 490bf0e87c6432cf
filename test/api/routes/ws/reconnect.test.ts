// Losing things on the way: the api process restarts, or its LISTEN
// connection drops. Either way the client ends up with the final state.
import pg from 'pg';
import t from 'tap';
import { startTestServer } from '../../../helpers/app.ts';
import { createTestDatabase } from '../../../helpers/db.ts';
import { createMember, enqueue } from '../../../helpers/fixtures.ts';
import { waitFor } from '../../../helpers/wait.ts';
import { startTestWorker } from '../../../helpers/worker.ts';
import { isJobMessage, TestSocket } from '../../../helpers/ws.ts';
import { z } from 'zod';
import { sql } from '../../../../core/db/pool.ts';
import { completeJob, markRunning } from '../../../../core/jobs/lifecycle.ts';

const databaseUrl = await createTestDatabase(t);

t.test('a client that reconnects after an api restart reads the final state', async (t) => {
  const first = await startTestServer(t, databaseUrl);
  const member = await createMember(first.db);
  const jobId = await enqueue(first.db, {
    kind: 'diag.steps',
    tenantId: member.tenantId,
    input: { steps: 3, delayMs: 150 },
  });

  const socket = await TestSocket.connect(first.wsUrl, member.token);
  socket.send({ type: 'subscribe', jobId });
  t.equal(((await socket.next(isJobMessage(jobId))).job as { status: string }).status, 'queued');

  await first.close(); // the api goes away while the job has not even started
  t.equal((await socket.closed).code, 1001);

  const worker = await startTestWorker(t, databaseUrl);
  // Let the job finish while no api is running.
  await waitFor(
    'the job to succeed',
    async () =>
      (await worker.db.oneFirst(
        sql.type(z.object({ status: z.string() }))`select status from jobs where id = ${jobId}`,
      )) === 'succeeded',
  );

  const second = await startTestServer(t, databaseUrl);
  const again = await TestSocket.connect(second.wsUrl, member.token);
  t.teardown(() => again.close());
  again.send({ type: 'subscribe', jobId });
  const final = (await again.next(isJobMessage(jobId))).job as { status: string; result: unknown };
  t.equal(final.status, 'succeeded');
  t.same(final.result, { steps: 3, attempt: 1 });
});

t.test('a change made while the LISTEN connection is down still reaches subscribers', async (t) => {
  const api = await startTestServer(t, databaseUrl);
  const member = await createMember(api.db);
  const socket = await TestSocket.connect(api.wsUrl, member.token);
  t.teardown(() => socket.close());
  const jobId = await enqueue(api.db, { kind: 'diag.noop', tenantId: member.tenantId });
  socket.send({ type: 'subscribe', jobId });
  t.equal(((await socket.next(isJobMessage(jobId))).job as { status: string }).status, 'queued');

  // Cut the hub's connection from the server side, as a failover would, and
  // finish the job at once, before the hub is back: its NOTIFY goes nowhere.
  const pid = api.hub.backendPid();
  t.ok(pid, 'hub has a backend');
  const admin = new pg.Client({ connectionString: databaseUrl });
  await admin.connect();
  await admin.query('select pg_terminate_backend($1)', [pid]);
  await admin.end();
  await markRunning(api.db, jobId, 1, { lockedBy: 'test', lockedAt: null });
  await completeJob(api.db, jobId, 1, { done: true });

  const final = (
    await socket.next((m) => isJobMessage(jobId)(m) && (m.job as { status: string }).status === 'succeeded', 20_000)
  ).job as { result: unknown };
  t.same(final.result, { done: true }, 'final state delivered by the re-read after reconnecting');
  t.ok(api.hub.connected, 'hub reconnected');
  t.not(api.hub.backendPid(), pid, 'on a new connection');
});
