// The realtime path end to end: enqueue -> real worker -> NOTIFY -> LISTEN
// -> websocket, and polling that returns the same JSON.
import t from 'tap';
import { createTestDatabase } from '../../../helpers/db.ts';
import { startTestServer } from '../../../helpers/app.ts';
import { createMember, enqueue } from '../../../helpers/fixtures.ts';
import { startTestWorker } from '../../../helpers/worker.ts';
import { isJobMessage, TestSocket, type Received } from '../../../helpers/ws.ts';

const databaseUrl = await createTestDatabase(t);
const api = await startTestServer(t, databaseUrl);
await startTestWorker(t, databaseUrl);
const alice = await createMember(api.db);
const bob = await createMember(api.db);

type Job = { id: string; status: string; version: number; progress: unknown; result: unknown };

t.test("a job's states arrive in order, end with the final one, and match polling", async (t) => {
  const socket = await TestSocket.connect(api.wsUrl, alice.token);
  t.teardown(() => socket.close());
  await socket.next((m) => m.type === 'ready');
  const jobId = await enqueue(api.db, {
    kind: 'diag.steps',
    tenantId: alice.tenantId,
    input: { steps: 3, delayMs: 30 },
  });
  socket.send({ type: 'subscribe', jobId });

  const seen: Job[] = [];
  for (;;) {
    const message = await socket.next(isJobMessage(jobId));
    const job = message.job as Job;
    seen.push(job);
    if (['succeeded', 'failed', 'cancelled'].includes(job.status)) break;
  }
  const versions = seen.map((j) => j.version);
  t.same(
    versions,
    [...versions].sort((a, b) => a - b),
    'versions only increase',
  );
  t.equal(new Set(versions).size, versions.length, 'no state twice');
  const last = seen.at(-1)!;
  t.equal(last.status, 'succeeded');
  t.same(last.result, { steps: 3, attempt: 1 });
  t.ok(
    seen.some((j) => j.status === 'running' && (j.progress as { step: number } | null)?.step === 1),
    'progress is pushed while running',
  );

  const polled = await api.app.inject({
    url: `/api/jobs/${jobId}`,
    headers: { authorization: `Bearer ${alice.token}` },
  });
  t.equal(polled.statusCode, 200);
  t.same(polled.json(), last, 'polling returns the same JSON as the final websocket message');
});

t.test("another tenant's job reads exactly like a missing job", async (t) => {
  const socket = await TestSocket.connect(api.wsUrl, bob.token);
  t.teardown(() => socket.close());
  await socket.next((m) => m.type === 'ready');
  const alicesJob = await enqueue(api.db, {
    kind: 'diag.steps',
    tenantId: alice.tenantId,
    input: { steps: 2, delayMs: 20 },
  });
  const missing = '6f1c1a4e-8d39-4b8e-9a53-2a3f1f1e0c55';

  socket.send({ type: 'subscribe', jobId: alicesJob });
  const foreign = await socket.next((m) => m.type === 'error' && m.jobId === alicesJob);
  socket.send({ type: 'subscribe', jobId: missing });
  const absent = await socket.next((m) => m.type === 'error' && m.jobId === missing);
  const strip = (m: Received) => ({ ...m, jobId: undefined });
  t.same(strip(foreign), strip(absent), 'same answer as a missing job');
  t.equal(foreign.code, 'not_found');

  // Nothing of Alice's job ever reaches Bob, even as it runs to the end.
  await new Promise((r) => setTimeout(r, 300));
  t.notOk(
    socket.messages.some((m) => m.type === 'job'),
    'no job message leaked',
  );

  const polledForeign = await api.app.inject({
    url: `/api/jobs/${alicesJob}`,
    headers: { authorization: `Bearer ${bob.token}` },
  });
  const polledMissing = await api.app.inject({
    url: `/api/jobs/${missing}`,
    headers: { authorization: `Bearer ${bob.token}` },
  });
  t.equal(polledForeign.statusCode, 404);
  t.same(polledForeign.json(), polledMissing.json());
});

t.test('authentication by a first message instead of a header', async (t) => {
  const socket = await TestSocket.connect(api.wsUrl);
  t.teardown(() => socket.close());
  socket.send({ type: 'subscribe', jobId: '6f1c1a4e-8d39-4b8e-9a53-2a3f1f1e0c55' });
  const refused = await socket.next((m) => m.type === 'error');
  t.equal(refused.code, 'unauthorized', 'nothing works before authentication');
  socket.send({ type: 'auth', token: alice.token });
  const ready = await socket.next((m) => m.type === 'ready');
  t.equal(ready.userId, alice.userId);
});

t.test('a bad token in the first message closes the connection', async (t) => {
  const socket = await TestSocket.connect(api.wsUrl);
  socket.send({ type: 'auth', token: 'not-a-token' });
  const error = await socket.next((m) => m.type === 'error');
  t.equal(error.code, 'unauthorized');
  const closed = await socket.closed;
  t.equal(closed.code, 4401);
});

t.test('a bad Authorization header is refused before the upgrade', async (t) => {
  await t.rejects(TestSocket.connect(api.wsUrl, 'bad.token.here'), /upgrade refused: 401/);
});

t.test('an unauthenticated connection is closed after the auth timeout', async (t) => {
  const quick = await startTestServer(t, databaseUrl, { WS_AUTH_TIMEOUT_MS: '200' });
  const socket = await TestSocket.connect(quick.wsUrl);
  const closed = await socket.closed;
  t.equal(closed.code, 4401);
  t.match(closed.reason, /timed out/);
});

t.test('malformed frames get a clear error and the connection stays up', async (t) => {
  const socket = await TestSocket.connect(api.wsUrl, alice.token);
  t.teardown(() => socket.close());
  await socket.next((m) => m.type === 'ready');
  for (const frame of [
    '{not json',
    JSON.stringify({ type: 'subscribe', jobId: 'nope' }),
    JSON.stringify({ type: 'dance' }),
    '[]',
  ]) {
    socket.send(frame);
    const error = await socket.next((m) => m.type === 'error');
    t.equal(error.code, 'invalid_message', `refused: ${frame}`);
    t.type(error.message, 'string');
  }
  socket.ws.send(Buffer.from([1, 2, 3]), { binary: true });
  t.equal((await socket.next((m) => m.type === 'error')).code, 'invalid_message', 'binary frame refused');
  socket.send({ type: 'ping' });
  t.ok(await socket.next((m) => m.type === 'pong'), 'still serving after bad frames');
});

t.test('too many subscriptions on one connection are refused', async (t) => {
  const small = await startTestServer(t, databaseUrl, { WS_MAX_SUBSCRIPTIONS: '1' });
  const socket = await TestSocket.connect(small.wsUrl, alice.token);
  t.teardown(() => socket.close());
  await socket.next((m) => m.type === 'ready');
  const first = await enqueue(api.db, {
    kind: 'diag.steps',
    tenantId: alice.tenantId,
    input: { steps: 1, delayMs: 5000 },
  });
  const second = await enqueue(api.db, {
    kind: 'diag.steps',
    tenantId: alice.tenantId,
    input: { steps: 1, delayMs: 5000 },
  });
  socket.send({ type: 'subscribe', jobId: first });
  await socket.next(isJobMessage(first));
  socket.send({ type: 'subscribe', jobId: second });
  const error = await socket.next((m) => m.type === 'error' && m.jobId === second);
  t.equal(error.code, 'too_many_subscriptions');
  socket.send({ type: 'unsubscribe', jobId: first });
  await socket.next((m) => m.type === 'unsubscribed');
  socket.send({ type: 'subscribe', jobId: second });
  t.ok(await socket.next(isJobMessage(second)), 'room again after unsubscribing');
});

t.test('shutdown closes websockets with a close frame', async (t) => {
  const server = await startTestServer(t, databaseUrl);
  const socket = await TestSocket.connect(server.wsUrl, alice.token);
  await socket.next((m) => m.type === 'ready');
  await server.close();
  const closed = await socket.closed;
  t.equal(closed.code, 1001);
  t.equal(closed.reason, 'server shutting down');
});
