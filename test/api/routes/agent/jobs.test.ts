// getAgentJob (extension): an agent polls the restore job it started with its
// own token; other kinds of jobs in its workspace, and every job of another
// workspace, read as not found.
import { randomUUID } from 'node:crypto';
import t from 'tap';
import { sql } from '../../../../core/db/pool.ts';
import { createRegistration } from '../../../../core/identity/registrations.ts';
import { enqueueJob } from '../../../../core/jobs/enqueue.ts';
import { createManagedAgent, restoreManagedAgent } from '../../../../core/managed-agents/managed-agents.ts';
import { enrollRunner } from '../../../../core/runners/runners.ts';
import { buildTestApp } from '../../../helpers/app.ts';
import { createTestDatabase } from '../../../helpers/db.ts';
import { agentAccessToken } from '../../../helpers/principals.ts';

const databaseUrl = await createTestDatabase(t);
const { app, db } = await buildTestApp(t, databaseUrl);

async function agent() {
  const { registration } = await createRegistration(db, { type: 'anonymous', ip: '10.8.0.1', claimTokenTtlS: 3600 });
  const token = await agentAccessToken(app, app.config, registration, ['svc:agents:write' as const]);
  return { tenantId: registration.tenant_id, token };
}
const getJob = (token: string, id: string) =>
  app.inject({ url: `/api/agent/v1/jobs/${id}`, headers: { authorization: `Bearer ${token}` } });

t.test('the restore job is readable by an agent of its workspace only', async (t) => {
  const a = await agent();
  const b = await agent();
  const { runnerId } = await enrollRunner(db, a.tenantId, 'r1');
  const managed = await createManagedAgent(db, {
    tenantId: a.tenantId,
    name: 'helper',
    kind: 'standalone',
    createdByPrincipal: null,
  });
  await db.query(sql.unsafe`update managed_agents set status = 'deleted', deleted_at = now() where id = ${managed.id}`);
  const { job } = await restoreManagedAgent(db, { ...managed, status: 'deleted' }, runnerId);

  const own = await getJob(a.token, job!.id);
  t.equal(own.statusCode, 200);
  t.match(own.json(), { id: job!.id, kind: 'agent.restore', status: 'queued', version: Number });

  const foreign = await getJob(b.token, job!.id);
  t.equal(foreign.statusCode, 404);
  t.match(foreign.json(), { code: 'not_found', next_action: 'reread_list' });

  // A chat turn of the same workspace is not the agent's to read.
  const chat = await db.transaction((tx) => enqueueJob(tx, { kind: 'chat.turn', tenantId: a.tenantId, input: {} }));
  t.equal((await getJob(a.token, chat.id)).statusCode, 404);
  t.equal((await getJob(a.token, randomUUID())).statusCode, 404);

  const malformed = await getJob(a.token, 'not-a-uuid');
  t.equal(malformed.statusCode, 400);
  t.match(malformed.json(), { code: 'invalid_request', details: [{ path: 'path.jobId' }] });
  t.equal((await app.inject({ url: `/api/agent/v1/jobs/${job!.id}` })).statusCode, 401);
});
