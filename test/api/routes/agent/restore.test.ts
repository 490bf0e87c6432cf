// restoreAgent (rule 6): readiness refusals are not recorded, so the
// identical retry runs once the runner and gateway are ready; the restore job
// completes when the reference runner acknowledges the work. Also the claim
// rule for unclaimed trials, tombstones, tenant isolation and idempotency.
import { randomUUID } from 'node:crypto';
import t from 'tap';
import { z } from 'zod';
import { signPlatformToken } from '../../../../core/auth/platform-token.ts';
import { sha256 } from '../../../../core/crypto/tokens.ts';
import { sql } from '../../../../core/db/pool.ts';
import { createRegistration } from '../../../../core/identity/registrations.ts';
import type { AgentScope } from '../../../../core/identity/tokens.ts';
import { createManagedAgent } from '../../../../core/managed-agents/managed-agents.ts';
import { enrollRunner, heartbeat } from '../../../../core/runners/runners.ts';
import { startTestServer } from '../../../helpers/app.ts';
import { TEST_SECRET } from '../../../helpers/config.ts';
import { createTestDatabase } from '../../../helpers/db.ts';
import { waitFor, waitForOutput } from '../../../helpers/wait.ts';
import { spawnEntry, startTestWorker } from '../../../helpers/worker.ts';
import { markClaimed } from '../../../helpers/fixtures.ts';
import { agentAccessToken } from '../../../helpers/principals.ts';

const databaseUrl = await createTestDatabase(t);
const api = await startTestServer(t, databaseUrl);
const { app, db } = api;

type Agent = { tenantId: string; principalId: string; token: string };

/** A registered agent with an access token; claimed ones get all scopes. */
async function agentOf(claimed: boolean, scopes?: AgentScope[]): Promise<Agent> {
  const { registration } = await createRegistration(db, { type: 'anonymous', ip: '10.7.0.1', claimTokenTtlS: 3600 });
  if (claimed) await markClaimed(db, registration.id);
  const token = await agentAccessToken(app, app.config, registration, scopes ?? ['svc:agents:write' as const]);
  return { tenantId: registration.tenant_id, principalId: registration.principal_id, token };
}

/** A tenant Admin of the agent's workspace, for the platform routes. */
async function adminOf(tenantId: string) {
  const userId = randomUUID();
  await db.query(sql.unsafe`insert into users (id, email) values (${userId}, ${`${userId}@example.test`})`);
  await db.query(
    sql.unsafe`insert into tenant_memberships (tenant_id, user_id, role) values (${tenantId}, ${userId}, 'admin')`,
  );
  const token = await signPlatformToken({ userId }, Buffer.from(TEST_SECRET, 'base64'), app.config.baseUrl);
  const headers = { authorization: `Bearer ${token}`, 'x-tenant-id': tenantId };
  return {
    post: (url: string, payload: object) => app.inject({ method: 'POST', url, headers, payload }),
    put: (url: string, payload: object) => app.inject({ method: 'PUT', url, headers, payload }),
    del: (url: string) => app.inject({ method: 'DELETE', url, headers }),
  };
}

const restore = (agent: Agent, ref: string, key: string | null, payload: object = {}) =>
  app.inject({
    method: 'POST',
    url: `/api/agent/v1/agents/${ref}/restore`,
    headers: { authorization: `Bearer ${agent.token}`, ...(key ? { 'idempotency-key': key } : {}) },
    payload,
  });

const runnerCall = (token: string, url: string, payload: object) =>
  app.inject({ method: 'POST', url, headers: { authorization: `Bearer ${token}` }, payload });

const jobOf = (id: string) =>
  db.one(
    sql.type(
      z.object({ status: z.string(), progress: z.unknown(), result: z.unknown() }),
    )`select status, progress, result from jobs where id = ${id}`,
  );
const workOf = (jobId: string) =>
  db.oneFirst(sql.type(z.object({ state: z.string() }))`select state from runner_work where job_id = ${jobId}`);
const recorded = (key: string) =>
  db.oneFirst(
    sql.type(z.object({ n: z.number() }))`select count(*)::int as n from idempotency_records where key = ${key}`,
  );

async function deletedAgent(agent: Agent, kind: 'standalone' | 'authority' = 'standalone', own = false) {
  const created = await createManagedAgent(db, {
    tenantId: agent.tenantId,
    name: `${kind} agent`,
    kind,
    createdByPrincipal: own ? agent.principalId : null,
  });
  await db.query(sql.unsafe`update managed_agents set status = 'deleted', deleted_at = now() where id = ${created.id}`);
  return created.id;
}

t.test(
  'each readiness refusal is not recorded; the identical retry succeeds and the reference runner completes the job',
  async (t) => {
    const agent = await agentOf(true);
    const admin = await adminOf(agent.tenantId);
    const created = await admin.post('/api/managed-agents', { name: 'Helper', kind: 'standalone' });
    t.equal(created.statusCode, 201);
    const agentId = created.json().id as string;
    t.match((await admin.del(`/api/managed-agents/${agentId}`)).json(), { status: 'deleted', deletedAt: String });

    const key = `restore-${randomUUID()}`;
    const body = { reason: 'needed again' };
    const refusedWith = async (status: number, code: string, reason: string) => {
      const res = await restore(agent, agentId, key, body);
      t.equal(res.statusCode, status, reason);
      t.match(res.json(), {
        code,
        message: new RegExp(reason),
        next_action: String,
        details: [{ path: 'reason', message: reason }],
      });
      t.equal(res.headers['idempotency-replayed'], undefined);
      t.equal(await recorded(key), 0, `${reason} was not recorded`);
    };

    await refusedWith(409, 'setup_required', 'runner_not_enrolled');
    const enrolled = await admin.post('/api/runners/enroll', { name: 'ci runner' });
    t.equal(enrolled.statusCode, 201);
    const { runnerId, token } = enrolled.json() as { runnerId: string; token: string };
    t.match(token, /^rnr_/);
    const stored = await db.oneFirst(
      sql.type(z.object({ token_hash: z.string() }))`select token_hash from runners where id = ${runnerId}`,
    );
    t.equal(stored, sha256(token), 'the runner token is stored only as its hash');

    t.same((await admin.put('/api/tenants/agent-settings', { runExecutionEnabled: false })).json(), {
      runExecutionEnabled: false,
    });
    await refusedWith(503, 'temporarily_disabled', 'run_execution_disabled');
    await admin.put('/api/tenants/agent-settings', { runExecutionEnabled: true });
    await refusedWith(503, 'temporarily_disabled', 'runner_offline');
    t.equal((await runnerCall(token, '/api/runners/heartbeat', { gatewayConnected: false })).statusCode, 200);
    await refusedWith(503, 'temporarily_disabled', 'cloud_gateway_not_connected');
    t.equal((await runnerCall('rnr_wrong', '/api/runners/heartbeat', { gatewayConnected: true })).statusCode, 401);

    await startTestWorker(t, databaseUrl);
    const runner = spawnEntry(
      t,
      'ops/runner.ts',
      { RUNNER_TOKEN: token, LOG_LEVEL: 'info' },
      { args: ['--url', api.url, '--interval', '200'] },
    );
    await waitForOutput(runner, /runner started/);
    await waitFor('the runner reporting its gateway', () =>
      db.oneFirst(
        sql.type(
          z.object({ gateway_connected: z.boolean() }),
        )`select gateway_connected from runners where id = ${runnerId}`,
      ),
    );

    const ok = await restore(agent, agentId, key, body);
    t.equal(ok.statusCode, 200, ok.body);
    const restored = ok.json();
    t.match(restored, {
      id: agentId,
      name: 'Helper',
      kind: 'standalone',
      status: 'active',
      restored_at: String,
      restore_job: { id: String, status: 'queued' },
    });
    const jobId = restored.restore_job.id as string;
    const job = await waitFor('the restore job to succeed', async () => {
      const j = await jobOf(jobId);
      return j.status === 'succeeded' ? j : null;
    });
    t.match(job.result, { managedAgentId: agentId, runnerId });
    t.equal(await workOf(jobId), 'done');
    await waitForOutput(runner, /restore acknowledged/);

    const replay = await restore(agent, agentId, key, body);
    t.equal(replay.statusCode, 200);
    t.equal(replay.headers['idempotency-replayed'], 'true');
    t.same(replay.json(), restored, 'the recorded body');
    t.equal(
      await db.oneFirst(
        sql.type(
          z.object({ n: z.number() }),
        )`select count(*)::int as n from runner_work where managed_agent_id = ${agentId}`,
      ),
      1,
      'not run twice',
    );

    runner.child.kill('SIGTERM');
    t.equal(await runner.exited, 0);
    t.match(runner.output(), /runner stopped/);
  },
);

t.test('the job waits for the runner (progress) until the work is acknowledged over the runner API', async (t) => {
  const agent = await agentOf(true);
  const { runnerId, token } = await enrollRunner(db, agent.tenantId, 'manual');
  await runnerCall(token, '/api/runners/heartbeat', { gatewayConnected: true });
  const agentId = await deletedAgent(agent);
  await startTestWorker(t, databaseUrl);
  const res = await restore(agent, agentId, `manual-${randomUUID()}`);
  t.equal(res.statusCode, 200, res.body);
  const jobId = res.json().restore_job.id as string;
  await waitFor('progress waiting_for_runner', async () => {
    const j = await jobOf(jobId);
    return (j.progress as { state?: string } | null)?.state === 'waiting_for_runner';
  });
  t.match(await jobOf(jobId), { status: 'running', progress: { state: 'waiting_for_runner', runnerId } });
  const beat = (await runnerCall(token, '/api/runners/heartbeat', { gatewayConnected: true })).json();
  t.match(beat.pendingWork, [{ kind: 'agent.restore', managedAgentId: agentId, jobId }]);
  const workId = beat.pendingWork[0].id as string;
  const other = await enrollRunner(db, agent.tenantId, 'other');
  t.equal(
    (await runnerCall(other.token, `/api/runners/work/${workId}/ack`, {})).statusCode,
    404,
    "another runner's work",
  );
  t.match((await runnerCall(token, `/api/runners/work/${workId}/ack`, {})).json(), {
    id: workId,
    state: 'acknowledged',
  });
  await waitFor('the restore job to succeed', async () => (await jobOf(jobId)).status === 'succeeded');
  t.same((await runnerCall(token, '/api/runners/heartbeat', { gatewayConnected: true })).json().pendingWork, []);
});

t.test('a deleted authority tombstone is never restored', async (t) => {
  const agent = await agentOf(true);
  const { token } = await enrollRunner(db, agent.tenantId, 'r');
  await runnerCall(token, '/api/runners/heartbeat', { gatewayConnected: true });
  const agentId = await deletedAgent(agent, 'authority');
  const res = await restore(agent, agentId, `tomb-${randomUUID()}`);
  t.equal(res.statusCode, 409);
  t.match(res.json(), { code: 'tombstone_not_restorable' });
  t.equal(
    await db.oneFirst(
      sql.type(z.object({ status: z.string() }))`select status from managed_agents where id = ${agentId}`,
    ),
    'deleted',
  );
});

t.test('an unclaimed trial restores only its own standalone agents', async (t) => {
  const trial = await agentOf(false);
  const { runnerId } = await enrollRunner(db, trial.tenantId, 'r');
  await heartbeat(db, { id: runnerId, tenant_id: trial.tenantId }, true);
  const own = await deletedAgent(trial, 'standalone', true);
  const notOwn = await deletedAgent(trial, 'standalone', false);
  const ownAuthority = await deletedAgent(trial, 'authority', true);
  for (const ref of [notOwn, ownAuthority]) {
    const res = await restore(trial, ref, `trial-${randomUUID()}`);
    t.equal(res.statusCode, 403);
    t.match(res.json(), { code: 'claim_required', next_action: 'claim_account' });
  }
  const ok = await restore(trial, own, `trial-${randomUUID()}`);
  t.equal(ok.statusCode, 200, ok.body);
  t.match(ok.json(), { id: own, status: 'active' });
});

t.test('tenant isolation, path bounds, scope and Idempotency-Key', async (t) => {
  const agent = await agentOf(true);
  const stranger = await agentOf(true);
  const foreign = await deletedAgent(stranger);
  const notFound = await restore(agent, foreign, `iso-${randomUUID()}`);
  t.equal(notFound.statusCode, 404);
  t.match(notFound.json(), { code: 'not_found' });
  t.equal((await restore(agent, 'not-a-uuid', `iso-${randomUUID()}`)).json().code, 'not_found');
  t.equal(
    (await restore(agent, 'x'.repeat(100), `iso-${randomUUID()}`)).statusCode,
    404,
    'a long ref within the bounds',
  );
  const empty = await restore(agent, '', `iso-${randomUUID()}`);
  t.equal(empty.statusCode, 400);
  t.equal(empty.json().code, 'invalid_request');
  t.equal((await restore(agent, foreign, `iso-${randomUUID()}`, { unknown: 1 })).statusCode, 400, 'unknown body field');

  const readOnly = await agentOf(true, ['svc:companies:read']);
  const denied = await restore(readOnly, await deletedAgent(readOnly), `scope-${randomUUID()}`);
  t.equal(denied.statusCode, 403);
  t.match(denied.json(), { code: 'scope_denied' });

  const noKey = await restore(agent, await deletedAgent(agent), null);
  t.equal(noKey.statusCode, 400);
  t.match(noKey.json(), { code: 'invalid_idempotency_key' });
  t.equal(
    (await app.inject({ method: 'POST', url: `/api/agent/v1/agents/${foreign}/restore`, payload: {} })).statusCode,
    401,
  );
});

t.test('the OpenAPI description of restoreAgent', async (t) => {
  const doc = (await app.inject('/openapi.json')).json();
  const op = doc.paths['/api/agent/v1/agents/{agentRef}/restore'].post;
  t.equal(op.operationId, 'restoreAgent');
  t.same(op.tags, ['agent']);
  t.same(op.security, [{ AgentBearer: ['svc:agents:write'] }]);
  t.same(Object.keys(op.responses).sort(), ['200', '400', '401', '403', '404', '409', '429', '503']);
  t.ok(doc.components.schemas.ManagedAgentResponse, 'ManagedAgentResponse is published');
  t.ok(doc.components.schemas['restoreAgent.request.v1'], 'the request schema is published');
});

t.test('agentRef bounds: 256 characters pass, 257 are 400 invalid_request', async (t) => {
  const agent = await agentOf(true);
  t.equal(
    (await restore(agent, 'x'.repeat(256), `len-${randomUUID()}`)).statusCode,
    404,
    '256 characters are within the bounds',
  );
  const tooLong = await restore(agent, 'x'.repeat(257), `len-${randomUUID()}`);
  t.equal(tooLong.statusCode, 400);
  t.equal(tooLong.json().code, 'invalid_request');
});
