// A websocket outlives the token that opened it: it closes at the token's
// expiry unless renewed, when the account is deleted, and it stops
// following a tenant's jobs when the membership ends.
import pg from 'pg';
import t from 'tap';
import { z } from 'zod';
import { signPlatformToken } from '../../../../core/auth/platform-token.ts';
import { sql } from '../../../../core/db/pool.ts';
import { startTestServer } from '../../../helpers/app.ts';
import { TEST_SECRET } from '../../../helpers/config.ts';
import { createTestDatabase } from '../../../helpers/db.ts';
import { createMember, enqueue } from '../../../helpers/fixtures.ts';
import { waitFor } from '../../../helpers/wait.ts';
import { startTestWorker } from '../../../helpers/worker.ts';
import { isJobMessage, TestSocket } from '../../../helpers/ws.ts';

const databaseUrl = await createTestDatabase(t);
const api = await startTestServer(t, databaseUrl);
await startTestWorker(t, databaseUrl);

// Short enough to wait for, long enough to connect with on a loaded machine.
const SHORT_TTL_S = 4;
const tokenFor = (userId: string, ttl: number) =>
  signPlatformToken({ userId }, Buffer.from(TEST_SECRET, 'base64'), 'http://localhost:3000', ttl);
const statusOf = async (jobId: string) =>
  api.db.oneFirst(sql.type(z.object({ status: z.string() }))`select status from jobs where id = ${jobId}`);

t.test('socket closed after token expiry and after account deletion', async (t) => {
  t.test('at the expiry of its token', async (t) => {
    const member = await createMember(api.db);
    const socket = await TestSocket.connect(api.wsUrl, await tokenFor(member.userId, SHORT_TTL_S));
    const ready = await socket.next((m) => m.type === 'ready');
    const expiresAt = Date.parse(ready.expiresAt as string);
    t.ok(expiresAt > Date.now(), 'ready says when the token expires');
    const closed = await socket.closed;
    t.equal(closed.code, 4401);
    t.match(closed.reason, /token expired/);
    t.ok(Date.now() >= expiresAt - 50, 'not before the expiry');
  });

  t.test('when the account is deleted', async (t) => {
    // The job's tenant has another member, so it (and the running job) stays.
    const owner = await createMember(api.db);
    const member = await createMember(api.db);
    await api.db.query(
      sql.unsafe`insert into tenant_memberships (tenant_id, user_id, role) values (${owner.tenantId}, ${member.userId}, 'viewer')`,
    );
    const socket = await TestSocket.connect(api.wsUrl, member.token);
    await socket.next((m) => m.type === 'ready');
    const jobId = await enqueue(api.db, {
      kind: 'diag.steps',
      tenantId: owner.tenantId,
      input: { steps: 10, delayMs: 200 },
    });
    socket.send({ type: 'subscribe', jobId });
    await socket.next(isJobMessage(jobId));

    const deleted = await api.app.inject({
      method: 'DELETE',
      url: '/api/auth/account',
      headers: { authorization: `Bearer ${member.token}` },
    });
    t.equal(deleted.statusCode, 200);
    const closed = await socket.closed;
    t.equal(closed.code, 4401);
    t.match(closed.reason, /account no longer exists/);
  });
});

t.test("a fresh token for the same user moves the deadline; another user's token is refused", async (t) => {
  const member = await createMember(api.db);
  const other = await createMember(api.db);
  const socket = await TestSocket.connect(api.wsUrl, await tokenFor(member.userId, SHORT_TTL_S));
  t.teardown(() => socket.close());
  const first = Date.parse((await socket.next((m) => m.type === 'ready')).expiresAt as string);

  socket.send({ type: 'auth', token: other.token });
  const refused = await socket.next((m) => m.type === 'error');
  t.equal(refused.code, 'unauthorized', "another user's token is refused");
  socket.send({ type: 'auth', token: 'not-a-token' });
  t.equal((await socket.next((m) => m.type === 'error')).code, 'unauthorized', 'an invalid renewal is refused');

  socket.send({ type: 'auth', token: await tokenFor(member.userId, 600) });
  const renewed = await socket.next((m) => m.type === 'ready');
  t.equal(renewed.userId, member.userId);
  t.ok(Date.parse(renewed.expiresAt as string) > first + 500_000, 'the deadline moved');

  // Past the first token's expiry the socket still serves.
  await waitFor('the first token to have expired', async () => Date.now() > first + 1_500);
  socket.send({ type: 'ping' });
  t.ok(await socket.next((m) => m.type === 'pong'), 'still open after the first expiry');
});

t.test("an ended membership ends the subscriptions to that tenant's jobs", async (t) => {
  const member = await createMember(api.db); // admin of tenant A
  const other = await createMember(api.db); // tenant B, which the member joins
  await api.db.query(
    sql.unsafe`insert into tenant_memberships (tenant_id, user_id, role) values (${other.tenantId}, ${member.userId}, 'viewer')`,
  );
  const socket = await TestSocket.connect(api.wsUrl, member.token);
  t.teardown(() => socket.close());
  // Everything received, in order (next() takes messages out of its queue).
  const log: Array<{ type: string; jobId?: string; job?: { id: string } }> = [];
  socket.ws.on('message', (data) => log.push(JSON.parse(String(data))));
  await socket.next((m) => m.type === 'ready');

  const inB = await enqueue(api.db, {
    kind: 'diag.steps',
    tenantId: other.tenantId,
    input: { steps: 8, delayMs: 300 },
  });
  const inA = await enqueue(api.db, {
    kind: 'diag.steps',
    tenantId: member.tenantId,
    input: { steps: 8, delayMs: 300 },
  });
  socket.send({ type: 'subscribe', jobId: inB });
  socket.send({ type: 'subscribe', jobId: inA });
  await socket.next((m) => isJobMessage(inB)(m) && (m.job as { status: string }).status === 'running', 30_000);
  await socket.next(isJobMessage(inA));

  await api.db.query(
    sql.unsafe`delete from tenant_memberships where tenant_id = ${other.tenantId} and user_id = ${member.userId}`,
  );
  const ended = await socket.next((m) => m.type === 'error' && m.jobId === inB, 15_000);
  t.equal(ended.code, 'not_found', 'the job now reads like a missing one');

  // Tenant A's job is still followed to its end; B's sends nothing more.
  const finalA = await socket.next(
    (m) => isJobMessage(inA)(m) && (m.job as { status: string }).status === 'succeeded',
    60_000,
  );
  t.ok(finalA, "the other tenant's job is still followed");
  await waitFor("tenant B's job to finish", async () => (await statusOf(inB)) === 'succeeded', 60_000);
  await new Promise((r) => setTimeout(r, 300)); // room for a stray NOTIFY to arrive
  const endedAt = log.findIndex((m) => m.type === 'error' && m.jobId === inB);
  t.notOk(
    log.slice(endedAt).some((m) => m.job?.id === inB),
    "nothing of tenant B's job after the membership ended",
  );

  socket.send({ type: 'subscribe', jobId: inB });
  t.equal(
    (await socket.next((m) => m.type === 'error' && m.jobId === inB)).code,
    'not_found',
    'and it cannot be followed again',
  );
});

t.test('a membership that ends while the LISTEN connection is down still ends the subscription', async (t) => {
  const member = await createMember(api.db);
  const other = await createMember(api.db);
  await api.db.query(
    sql.unsafe`insert into tenant_memberships (tenant_id, user_id, role) values (${other.tenantId}, ${member.userId}, 'viewer')`,
  );
  const socket = await TestSocket.connect(api.wsUrl, member.token);
  t.teardown(() => socket.close());
  await socket.next((m) => m.type === 'ready');
  const jobId = await enqueue(api.db, {
    kind: 'diag.steps',
    tenantId: other.tenantId,
    input: { steps: 10, delayMs: 300 },
  });
  socket.send({ type: 'subscribe', jobId });
  await socket.next(isJobMessage(jobId));

  // Cut the hub's connection and end the membership at once: its NOTIFY
  // most likely goes nowhere, and the check after reconnecting must catch it.
  const admin = new pg.Client({ connectionString: databaseUrl });
  await admin.connect();
  await admin.query('select pg_terminate_backend($1)', [api.hub.backendPid()]);
  await admin.query('delete from tenant_memberships where tenant_id = $1 and user_id = $2', [
    other.tenantId,
    member.userId,
  ]);
  await admin.end();
  const ended = await socket.next((m) => m.type === 'error' && m.jobId === jobId, 30_000);
  t.equal(ended.code, 'not_found');
  await waitFor('the job to finish', async () => (await statusOf(jobId)) === 'succeeded', 60_000);
});
