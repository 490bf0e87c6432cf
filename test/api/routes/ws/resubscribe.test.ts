// A subscribe that fails because the database is away is answered
// "unavailable", and once the database is back the same subscribe works.
// The outage is real: the api reaches PostgreSQL through a TCP proxy that
// the test cuts, so its pool and LISTEN connection both lose the server.
import t from 'tap';
import { startTestServer } from '../../../helpers/app.ts';
import { createTestDatabase, testPool } from '../../../helpers/db.ts';
import { createMember, enqueue } from '../../../helpers/fixtures.ts';
import { waitFor } from '../../../helpers/wait.ts';
import { startTestWorker } from '../../../helpers/worker.ts';
import { isJobMessage, TestSocket, type Received } from '../../../helpers/ws.ts';
import { startTcpProxy } from './tcp-proxy.ts';

const databaseUrl = await createTestDatabase(t);
const direct = await testPool(t, databaseUrl);

t.test('websocket re-subscribe after a failed one', async (t) => {
  // The member exists before the api listens: its membership notification,
  // if it arrived during the cut, would make the api re-check access, fail
  // and close the socket with 1013 (right, but not what this test is about).
  const member = await createMember(direct);
  const jobId = await enqueue(direct, {
    kind: 'diag.steps',
    tenantId: member.tenantId,
    input: { steps: 2, delayMs: 20 },
  });
  const proxy = await startTcpProxy(databaseUrl);
  const api = await startTestServer(t, proxy.url);
  // The api closes through the proxy, so the proxy goes last.
  t.teardown(async () => {
    // slonik's pool.end() rethrows the error of a query that died with its
    // connection during the outage; everything else is closed by then.
    await api.close().catch((error: Error) => t.comment(`pool end after the outage: ${error.message}`));
    await proxy.close();
  });

  const socket = await TestSocket.connect(api.wsUrl, member.token);
  t.teardown(() => socket.close());
  await socket.next((m) => m.type === 'ready');

  await proxy.cut();
  socket.send({ type: 'subscribe', jobId });
  const closed = socket.closed.then(({ code, reason }) =>
    Promise.reject(new Error(`socket closed: ${code} ${reason}`)),
  );
  closed.catch(() => undefined); // the teardown's close is expected
  const failed = await Promise.race([socket.next((m) => m.type === 'error' && m.jobId === jobId, 30_000), closed]);
  t.equal(failed.code, 'unavailable', 'the failure says the database is away');
  t.match(failed.message, /again/, 'and tells the client to retry');

  await proxy.restore();
  // Retry as the protocol asks, until the database answers. Before the fix a
  // failed subscribe stayed registered and every later one went unanswered.
  const answer = await waitFor(
    'a subscribe to be answered with the job',
    async () => {
      socket.send({ type: 'subscribe', jobId });
      const reply = await socket.next(
        (m: Received) => isJobMessage(jobId)(m) || (m.type === 'error' && m.jobId === jobId),
        10_000,
      );
      if (reply.type === 'error') {
        t.equal(reply.code, 'unavailable', 'only "unavailable" while the pool reconnects');
        await new Promise((r) => setTimeout(r, 300));
        return null;
      }
      return reply;
    },
    60_000,
  );
  t.equal((answer.job as { status: string }).status, 'queued', 'the job as it is now');

  // And the subscription is live: the job's run arrives, to its final state.
  await waitFor('the LISTEN connection to be back', async () => api.hub.connected, 30_000);
  await startTestWorker(t, databaseUrl);
  const final = await socket.next(
    (m) => isJobMessage(jobId)(m) && (m.job as { status: string }).status === 'succeeded',
    60_000,
  );
  t.same((final.job as { result: unknown }).result, { steps: 2, attempt: 1 });
});
