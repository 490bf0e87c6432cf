// Runner and managed-agent platform routes: Admin only, tenant-scoped, the
// runner token as the runner's only credential.
import { randomUUID } from 'node:crypto';
import t from 'tap';
import { buildTestApp } from '../../../helpers/app.ts';
import { createTestDatabase } from '../../../helpers/db.ts';
import { createMember, type Member } from '../../../helpers/fixtures.ts';

const databaseUrl = await createTestDatabase(t);
const { app, db } = await buildTestApp(t, databaseUrl);

const as = (m: Member) => {
  const headers = { authorization: `Bearer ${m.token}`, 'x-tenant-id': m.tenantId };
  return {
    get: (url: string) => app.inject({ method: 'GET', url, headers }),
    post: (url: string, payload: object) => app.inject({ method: 'POST', url, headers, payload }),
    put: (url: string, payload: object) => app.inject({ method: 'PUT', url, headers, payload }),
    del: (url: string) => app.inject({ method: 'DELETE', url, headers }),
  };
};

t.test('Admins only: viewers are refused, other tenants read as absent', async (t) => {
  const admin = as(await createMember(db, 'admin'));
  const viewer = as(await createMember(db, 'viewer'));
  t.equal((await viewer.post('/api/runners/enroll', {})).statusCode, 403);
  t.equal((await viewer.put('/api/tenants/agent-settings', { runExecutionEnabled: false })).statusCode, 403);
  t.equal((await viewer.post('/api/managed-agents', { name: 'x' })).statusCode, 403);
  t.same((await admin.get('/api/tenants/agent-settings')).json(), { runExecutionEnabled: true }, 'on by default');

  const created = await admin.post('/api/managed-agents', { name: 'Ops', kind: 'authority' });
  t.equal(created.statusCode, 201);
  t.match(created.json(), { name: 'Ops', kind: 'authority', status: 'active', deletedAt: null });
  const id = created.json().id as string;
  const other = as(await createMember(db, 'admin'));
  t.equal((await other.del(`/api/managed-agents/${id}`)).statusCode, 404, "another tenant's agent");
  t.equal((await admin.del(`/api/managed-agents/${randomUUID()}`)).statusCode, 404);
  const first = (await admin.del(`/api/managed-agents/${id}`)).json();
  t.equal(first.status, 'deleted');
  t.same((await admin.del(`/api/managed-agents/${id}`)).json(), first, 'deleting again changes nothing');
});

t.test('the runner token authenticates heartbeats and acknowledgements only', async (t) => {
  const admin = as(await createMember(db, 'admin'));
  const { token } = (await admin.post('/api/runners/enroll', { name: 'r1' })).json();
  const beat = (authorization?: string) =>
    app.inject({
      method: 'POST',
      url: '/api/runners/heartbeat',
      headers: authorization ? { authorization } : {},
      payload: { gatewayConnected: true },
    });
  t.equal((await beat()).statusCode, 401);
  t.equal((await beat('Bearer rnr_nope')).statusCode, 401);
  t.same((await beat(`Bearer ${token}`)).json(), { pendingWork: [], heartbeatIntervalSeconds: 5 });
  const ack = await app.inject({
    method: 'POST',
    url: `/api/runners/work/${randomUUID()}/ack`,
    headers: { authorization: `Bearer ${token}` },
    payload: {},
  });
  t.equal(ack.statusCode, 404);
  t.match(ack.json(), { error: 'not_found', status: 404 });
  const asPlatform = await app.inject({
    method: 'POST',
    url: '/api/runners/enroll',
    headers: { authorization: `Bearer ${token}` },
    payload: {},
  });
  t.equal(asPlatform.statusCode, 401, 'a runner token is no platform token');
});
