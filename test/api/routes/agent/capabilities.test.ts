// GET /api/agent/v1/capabilities reports live setup and approval state: it
// changes as a runner is enrolled, run execution switched, the runner seen,
// an approval asked for and decided, and at every step it agrees with what
// restoreAgent and publishInsightBoard answer.
import t from 'tap';
import { decideApproval } from '../../../../core/boards/approvals.ts';
import { sql } from '../../../../core/db/pool.ts';
import { createRegistration } from '../../../../core/identity/registrations.ts';
import { AGENT_SCOPES } from '../../../../core/identity/tokens.ts';
import { createManagedAgent } from '../../../../core/managed-agents/managed-agents.ts';
import { enrollRunner, heartbeat, setRunExecutionEnabled } from '../../../../core/runners/runners.ts';
import { buildTestApp } from '../../../helpers/app.ts';
import { createTestDatabase } from '../../../helpers/db.ts';
import { agentAccessToken } from '../../../helpers/principals.ts';
import { createBoardScopes, createMember, markClaimed } from '../../../helpers/fixtures.ts';

const databaseUrl = await createTestDatabase(t);
const { app, db, config } = await buildTestApp(t, databaseUrl);

async function agent() {
  const { registration } = await createRegistration(db, { type: 'anonymous', ip: '10.9.1.1', claimTokenTtlS: 600 });
  await markClaimed(db, registration.id);
  const claims = {
    principalId: registration.principal_id,
    registrationId: registration.id,
    tenantId: registration.tenant_id,
  };
  const token = await agentAccessToken(app, config, registration, [...AGENT_SCOPES]);
  return { ...claims, token };
}
type Agent = Awaited<ReturnType<typeof agent>>;

let keys = 0;
const capabilities = async (a: Agent) => {
  const res = await app.inject({ url: '/api/agent/v1/capabilities', headers: { authorization: `Bearer ${a.token}` } });
  t.equal(res.statusCode, 200, 'capabilities');
  return res.json();
};
const post = (a: Agent, url: string, payload: object) =>
  app.inject({
    method: 'POST',
    url,
    payload,
    headers: { authorization: `Bearer ${a.token}`, 'idempotency-key': `caps-key-${++keys}` },
  });

t.test('setup: each step changes the capabilities, which name the reason restore answers', async (t) => {
  const a = await agent();
  const managed = await createManagedAgent(db, {
    tenantId: a.tenantId,
    name: 'helper',
    kind: 'standalone',
    createdByPrincipal: a.principalId,
  });
  await db.query(sql.unsafe`update managed_agents set status = 'deleted', deleted_at = now() where id = ${managed.id}`);
  const restore = () => post(a, `/api/agent/v1/agents/${managed.id}/restore`, {});
  const agree = async (label: string, steps: string[]) => {
    const caps = await capabilities(a);
    t.same(caps.setup.pending_steps, steps, `${label}: pending steps`);
    t.equal(caps.setup.complete, steps.length === 0, `${label}: complete`);
    const res = await restore();
    if (steps.length === 0) {
      t.same(caps.setup.restore, { ready: true, reason: null });
      t.equal(res.statusCode, 200, `${label}: restore runs`);
    } else {
      t.same(caps.setup.restore, { ready: false, reason: steps[0] });
      t.same(
        res.json().details,
        [{ path: 'reason', message: steps[0] }],
        `${label}: restore refuses for the reason capabilities name`,
      );
    }
    return caps;
  };

  const none = await agree('no runner', ['runner_not_enrolled']);
  t.match(none.setup, {
    runner_enrolled: false,
    run_execution_enabled: true,
    runner_online: false,
    gateway_connected: false,
  });
  t.match(
    none.next_actions.filter((n: { action: string }) => n.action === 'complete_setup'),
    [{ action: 'complete_setup', actor: 'person', method: 'POST', endpoint: `${config.baseUrl}/api/runners/enroll` }],
  );

  await setRunExecutionEnabled(db, a.tenantId, false);
  await agree('no runner, execution off', ['runner_not_enrolled', 'run_execution_disabled']);
  const { runnerId } = await enrollRunner(db, a.tenantId, 'r1');
  const off = await agree('enrolled, execution off', [
    'run_execution_disabled',
    'runner_offline',
    'cloud_gateway_not_connected',
  ]);
  t.match(off.setup, { runner_enrolled: true, run_execution_enabled: false });
  t.ok(
    off.next_actions.some(
      (n: { action: string; method?: string }) => n.action === 'complete_setup' && n.method === 'PUT',
    ),
  );
  await setRunExecutionEnabled(db, a.tenantId, true);
  await agree('enrolled, never seen', ['runner_offline', 'cloud_gateway_not_connected']);
  await heartbeat(db, { id: runnerId, tenant_id: a.tenantId }, false);
  await agree('online, no gateway', ['cloud_gateway_not_connected']);
  await heartbeat(db, { id: runnerId, tenant_id: a.tenantId }, true);
  const ready = await agree('ready', []);
  t.match(ready.setup, {
    runner_enrolled: true,
    run_execution_enabled: true,
    runner_online: true,
    gateway_connected: true,
  });
  t.notOk(ready.next_actions.some((n: { action: string }) => n.action === 'complete_setup'));
});

t.test('approvals: pending while publish answers approval_required, gone once decided', async (t) => {
  const a = await agent();
  const { companyId } = await createBoardScopes(db, a.tenantId);
  const admin = await createMember(db, 'admin');
  await db.query(
    sql.unsafe`insert into tenant_memberships (tenant_id, user_id, role) values (${a.tenantId}, ${admin.userId}, 'admin')`,
  );
  t.same((await capabilities(a)).approvals.pending, []);

  const board = (
    await post(a, '/api/agent/v1/boards', {
      title: 'Q3',
      scope_type: 'company',
      scope_id: companyId,
      content: { n: 1 },
    })
  ).json().id;
  const asked = (await post(a, `/api/agent/v1/boards/${board}/publish`, { visibility: 'public' })).json();
  t.equal(asked.state, 'approval_required');
  const caps = await capabilities(a);
  t.same(caps.approvals.pending, [asked.approval.id]);
  t.match(caps.approvals.items, [
    {
      id: asked.approval.id,
      board_id: board,
      version: 1,
      visibility: 'public',
      requested_by_you: true,
      approve_url: asked.approval.approve_url,
    },
  ]);
  t.match(caps.next_actions.at(-1), { action: 'await_approval', actor: 'person', url: asked.approval.approve_url });
  t.notMatch(JSON.stringify(caps), /bl_|eyJ/, 'no credential');
  const again = (await post(a, `/api/agent/v1/boards/${board}/publish`, { visibility: 'public' })).json();
  t.match(again, { state: 'approval_required', approval: { id: asked.approval.id } }, 'publish agrees: still pending');

  const other = await capabilities(await agent());
  t.same(other.approvals.pending, [], 'another workspace sees none of it');

  await decideApproval(db, a.tenantId, asked.approval.id, admin.userId, 'approved');
  t.same((await capabilities(a)).approvals.pending, [], 'approved: no longer pending');
  t.equal(
    (await post(a, `/api/agent/v1/boards/${board}/publish`, { visibility: 'public' })).json().state,
    'published',
    'publish agrees',
  );

  // A request for another version, denied.
  await app.inject({
    method: 'PUT',
    url: `/api/agent/v1/boards/${board}/content`,
    payload: { content: { n: 2 } },
    headers: { authorization: `Bearer ${a.token}`, 'idempotency-key': `caps-key-${++keys}` },
  });
  const second = (await post(a, `/api/agent/v1/boards/${board}/publish`, { version: 2, visibility: 'public' })).json();
  t.equal(second.state, 'approval_required');
  await decideApproval(db, a.tenantId, second.approval.id, admin.userId, 'denied');
  t.same((await capabilities(a)).approvals.pending, []);
  t.equal(
    (await post(a, `/api/agent/v1/boards/${board}/publish`, { version: 2, visibility: 'public' })).json().code,
    'approval_denied',
    'publish agrees: denied',
  );
});
