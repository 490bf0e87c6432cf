// Listing, reading and revoking runners (platform API): Viewers read, Admins
// revoke, another tenant's runner is a plain 404, keyset pages, and what a
// revocation does to the token, to restore readiness and to pending work.
import { randomUUID } from 'node:crypto';
import t from 'tap';
import { z } from 'zod';
import { signPlatformToken } from '../../../../core/auth/platform-token.ts';
import { sql } from '../../../../core/db/pool.ts';
import { createRegistration } from '../../../../core/identity/registrations.ts';
import { createManagedAgent } from '../../../../core/managed-agents/managed-agents.ts';
import {
  acknowledgeWork,
  heartbeat,
  RUNNER_OFFLINE_AFTER_S,
  RunnerRevokedError,
} from '../../../../core/runners/runners.ts';
import { buildTestApp } from '../../../helpers/app.ts';
import { TEST_SECRET } from '../../../helpers/config.ts';
import { createTestDatabase } from '../../../helpers/db.ts';
import { createMember, markClaimed } from '../../../helpers/fixtures.ts';
import { agentAccessToken } from '../../../helpers/principals.ts';

const databaseUrl = await createTestDatabase(t);
const { app, db } = await buildTestApp(t, databaseUrl);

/** A member of the tenant with the given role, speaking the platform API. */
async function memberOf(tenantId: string, role: 'admin' | 'viewer') {
  const userId = randomUUID();
  await db.query(sql.unsafe`insert into users (id, email) values (${userId}, ${`${userId}@example.test`})`);
  await db.query(
    sql.unsafe`insert into tenant_memberships (tenant_id, user_id, role) values (${tenantId}, ${userId}, ${role})`,
  );
  const token = await signPlatformToken({ userId }, Buffer.from(TEST_SECRET, 'base64'), app.config.baseUrl);
  const headers = { authorization: `Bearer ${token}`, 'x-tenant-id': tenantId };
  return {
    get: (url: string) => app.inject({ method: 'GET', url, headers }),
    post: (url: string, payload: object) => app.inject({ method: 'POST', url, headers, payload }),
    del: (url: string) => app.inject({ method: 'DELETE', url, headers }),
  };
}
type Member = Awaited<ReturnType<typeof memberOf>>;

const enroll = async (admin: Member, name: string) => {
  const res = await admin.post('/api/runners/enroll', { name });
  return res.json() as { runnerId: string; token: string };
};
const runnerCall = (token: string, url: string, payload: object) =>
  app.inject({ method: 'POST', url, headers: { authorization: `Bearer ${token}` }, payload });
const beat = (token: string, gatewayConnected = true) =>
  runnerCall(token, '/api/runners/heartbeat', { gatewayConnected });

t.test('Viewers list and read runners; the token and its hash never appear', async (t) => {
  const tenantId = (await createMember(db, 'admin')).tenantId;
  const admin = await memberOf(tenantId, 'admin');
  const viewer = await memberOf(tenantId, 'viewer');
  const { runnerId, token } = await enroll(admin, 'build box');
  t.equal((await beat(token, false)).statusCode, 200);

  const list = await viewer.get('/api/runners');
  t.equal(list.statusCode, 200, list.body);
  t.same(list.json(), {
    items: [
      {
        id: runnerId,
        name: 'build box',
        status: 'active',
        enrolledAt: list.json().items[0].enrolledAt,
        lastHeartbeatAt: list.json().items[0].lastHeartbeatAt,
        online: true,
        gatewayConnected: false,
        revokedAt: null,
      },
    ],
    nextCursor: null,
  });
  t.match(list.json().items[0], { enrolledAt: String, lastHeartbeatAt: String });
  t.notMatch(list.body, token.slice(4), 'no token');
  t.notMatch(list.body, /hash/i, 'no hash');

  const one = await viewer.get(`/api/runners/${runnerId}`);
  t.equal(one.statusCode, 200);
  t.same(one.json(), list.json().items[0], 'one runner reads like its list item');

  // Offline exactly as readiness counts it: no heartbeat within the threshold.
  await db.query(
    sql.unsafe`update runners set last_heartbeat_at = now() - make_interval(secs => ${RUNNER_OFFLINE_AFTER_S + 1}) where id = ${runnerId}`,
  );
  t.equal((await viewer.get(`/api/runners/${runnerId}`)).json().online, false, 'silent for longer than the threshold');
  const fresh = await enroll(admin, 'never seen');
  t.match((await viewer.get(`/api/runners/${fresh.runnerId}`)).json(), {
    online: false,
    lastHeartbeatAt: null,
    gatewayConnected: false,
  });
});

t.test('keyset pages: newest first, no repeats when runners are enrolled while paging, bounds checked', async (t) => {
  const tenantId = (await createMember(db, 'admin')).tenantId;
  const admin = await memberOf(tenantId, 'admin');
  const ids: string[] = [];
  for (let i = 0; i < 5; i++) ids.push((await enroll(admin, `r${i}`)).runnerId);
  // Two runners enrolled in the same microsecond are still told apart by id.
  await db.query(
    sql.unsafe`update runners set enrolled_at = (select enrolled_at from runners where id = ${ids[1]!}) where id = ${ids[2]!}`,
  );

  const seen: string[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const res = await admin.get(`/api/runners?limit=2${cursor ? `&cursor=${cursor}` : ''}`);
    t.equal(res.statusCode, 200, res.body);
    const page = res.json() as { items: { id: string }[]; nextCursor: string | null };
    t.ok(page.items.length <= 2);
    seen.push(...page.items.map((r) => r.id));
    if (pages++ === 0) await enroll(admin, 'late'); // newer than every page still to come
    cursor = page.nextCursor;
  } while (cursor);
  t.equal(new Set(seen).size, 5, 'no repeats');
  t.same(new Set(seen), new Set(ids), 'every runner, and not the one enrolled meanwhile');
  t.equal(seen[0], ids[4], 'newest first');
  t.equal(pages, 3);

  t.equal((await admin.get('/api/runners?limit=0')).statusCode, 400);
  t.equal((await admin.get('/api/runners?limit=101')).statusCode, 400);
  t.equal((await admin.get('/api/runners?limit=100')).statusCode, 200);
  const bad = await admin.get('/api/runners?cursor=nope');
  t.equal(bad.statusCode, 400);
  t.match(bad.json(), { error: 'invalid_request', message: /cursor/ });
  t.equal((await admin.get('/api/runners?status=gone')).statusCode, 400);

  await admin.del(`/api/runners/${ids[0]!}`);
  t.same(
    (await admin.get('/api/runners?status=revoked')).json().items.map((r: { id: string }) => r.id),
    [ids[0]],
  );
  t.equal(
    (await admin.get('/api/runners?status=active&limit=100')).json().items.length,
    5,
    'four left plus the late one',
  );
});

t.test('revoking: Admin only, tenant-scoped, repeatable', async (t) => {
  const tenantId = (await createMember(db, 'admin')).tenantId;
  const admin = await memberOf(tenantId, 'admin');
  const viewer = await memberOf(tenantId, 'viewer');
  const { runnerId, token } = await enroll(admin, 'to revoke');
  await beat(token);

  const denied = await viewer.del(`/api/runners/${runnerId}`);
  t.equal(denied.statusCode, 403);
  t.match(denied.json(), { error: 'forbidden', status: 403 });

  const stranger = await memberOf((await createMember(db, 'admin')).tenantId, 'admin');
  for (const res of [
    await stranger.get(`/api/runners/${runnerId}`),
    await stranger.del(`/api/runners/${runnerId}`),
    await admin.get(`/api/runners/${randomUUID()}`),
    await admin.del(`/api/runners/${randomUUID()}`),
  ]) {
    t.equal(res.statusCode, 404);
    t.match(res.json(), { error: 'not_found', status: 404, message: 'No such runner.' });
  }
  t.same(
    (await stranger.get('/api/runners')).json(),
    { items: [], nextCursor: null },
    "another tenant's list is its own",
  );
  t.equal((await admin.get('/api/runners/not-a-uuid')).statusCode, 400);
  t.equal((await app.inject({ method: 'GET', url: '/api/runners' })).statusCode, 401);
  t.equal((await viewer.get(`/api/runners/${runnerId}`)).json().status, 'active', 'the refused revoke changed nothing');

  const first = await admin.del(`/api/runners/${runnerId}`);
  t.equal(first.statusCode, 200);
  t.match(first.json(), { id: runnerId, status: 'revoked', revokedAt: String, online: false });
  const again = await admin.del(`/api/runners/${runnerId}`);
  t.equal(again.statusCode, 200);
  t.same(again.json(), first.json(), 'revoking again changes nothing, revokedAt included');
  t.same((await viewer.get(`/api/runners/${runnerId}`)).json(), first.json());
});

t.test('a revoked token stops authenticating at once; its pending work stays pending', async (t) => {
  const { registration } = await createRegistration(db, { type: 'anonymous', ip: '10.8.0.1', claimTokenTtlS: 3600 });
  const tenantId = registration.tenant_id;
  await markClaimed(db, registration.id);
  const agentToken = await agentAccessToken(app, app.config, registration, ['svc:agents:write' as const]);
  const restore = (agentId: string) =>
    app.inject({
      method: 'POST',
      url: `/api/agent/v1/agents/${agentId}/restore`,
      headers: { authorization: `Bearer ${agentToken}`, 'idempotency-key': randomUUID() },
      payload: {},
    });
  const deletedAgent = async () => {
    const agent = await createManagedAgent(db, { tenantId, name: 'Helper', kind: 'standalone' });
    await db.query(sql.unsafe`update managed_agents set status = 'deleted', deleted_at = now() where id = ${agent.id}`);
    return agent.id;
  };
  const admin = await memberOf(tenantId, 'admin');
  const { runnerId, token } = await enroll(admin, 'only runner');
  t.equal((await beat(token)).statusCode, 200);

  // A restore hands work to the runner (no worker runs here, so it stays pending).
  const restored = await restore(await deletedAgent());
  t.equal(restored.statusCode, 200, restored.body);
  const workState = () =>
    db.oneFirst(sql.type(z.object({ state: z.string() }))`select state from runner_work where runner_id = ${runnerId}`);
  const workId = await db.oneFirst(
    sql.type(z.object({ id: z.string() }))`select id from runner_work where runner_id = ${runnerId}`,
  );
  t.equal(await workState(), 'pending');

  t.equal((await admin.del(`/api/runners/${runnerId}`)).statusCode, 200);
  for (const res of [await beat(token), await runnerCall(token, `/api/runners/work/${workId}/ack`, {})]) {
    t.equal(res.statusCode, 401);
    t.match(res.json(), { error: 'unauthorized', status: 401 });
  }
  // A request that checked the token just before the revoke gets nowhere either.
  const identity = { id: runnerId, tenant_id: tenantId };
  await t.rejects(heartbeat(db, identity, true), RunnerRevokedError);
  await t.rejects(acknowledgeWork(db, identity, workId), RunnerRevokedError);
  t.equal(await workState(), 'pending', 'nobody can acknowledge it; the restore job times out and fails');

  // Readiness never picks the revoked runner, though it was seen a moment ago.
  const refused = await restore(await deletedAgent());
  t.equal(refused.statusCode, 409);
  t.match(refused.json(), { code: 'setup_required', details: [{ path: 'reason', message: 'runner_not_enrolled' }] });
  const spare = await enroll(admin, 'spare');
  const offline = await restore(await deletedAgent());
  t.equal(offline.statusCode, 503, 'the remaining runner has not sent a heartbeat');
  t.match(offline.json(), { code: 'temporarily_disabled', details: [{ path: 'reason', message: 'runner_offline' }] });
  await beat(spare.token);
  const ok = await restore(await deletedAgent());
  t.equal(ok.statusCode, 200, ok.body);
  t.match(
    await db.oneFirst(
      sql.type(
        z.object({ runner_id: z.string() }),
      )`select runner_id from runner_work where job_id = ${ok.json().restore_job.id}`,
    ),
    spare.runnerId,
  );
});
