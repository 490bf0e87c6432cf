// An operator suspends a tenant (ops/tenant-suspend.ts): its agents get 403
// tenant_inactive on the Agent API and MCP, its people a platform 403
// tenant_inactive, also with warm caches (NOTIFY from 0023); other tenants
// are untouched; resuming restores access. And identity_conflict: a token
// whose workspace is not its registration's.
import t from 'tap';
import { sql } from '../../../core/db/pool.ts';
import { resources, signAccessToken, AGENT_SCOPES } from '../../../core/identity/tokens.ts';
import { resumeTenant } from '../../../core/tenants/suspension.ts';
import { buildTestApp } from '../../helpers/app.ts';
import { testEnv } from '../../helpers/config.ts';
import { createTestDatabase } from '../../helpers/db.ts';
import { createWorkspace, type Workspace } from '../../helpers/principals.ts';
import { waitFor } from '../../helpers/wait.ts';
import { spawnEntry } from '../../helpers/worker.ts';

const databaseUrl = await createTestDatabase(t);
const { app, db, config } = await buildTestApp(t, databaseUrl);
const [a, b] = [await createWorkspace(app, db, config), await createWorkspace(app, db, config)];

const MCP_HEADERS = {
  'content-type': 'application/json',
  accept: 'application/json, text/event-stream',
  'mcp-protocol-version': '2025-11-25',
};
const mcpToken = (w: Workspace) =>
  signAccessToken(
    app.idpKeys,
    config.authUrl,
    resources(config.baseUrl).mcp,
    {
      principalId: w.agent.principalId,
      registrationId: w.agent.registrationId,
      tenantId: w.tenantId,
      scopes: [...AGENT_SCOPES],
    },
    300,
  );
const agentMe = (w: Workspace) =>
  app.inject({ url: '/api/agent/v1/me', headers: { authorization: `Bearer ${w.agent.token}` } });
const mcpList = async (w: Workspace) =>
  app.inject({
    method: 'POST',
    url: '/mcp',
    headers: { ...MCP_HEADERS, authorization: `Bearer ${await mcpToken(w)}` },
    payload: { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} },
  });
const companies = (w: Workspace) =>
  app.inject({
    url: '/api/companies',
    headers: { authorization: `Bearer ${w.admin.token}`, 'x-tenant-id': w.tenantId },
  });
// A route of the spec's "Auth" class: no x-tenant-id, the caller's own workspace.
const keys = (w: Workspace) =>
  app.inject({ url: '/api/provider-keys/', headers: { authorization: `Bearer ${w.admin.token}` } });

t.test('suspended by the operator script: agents and people refused, other tenants not; resumed: back', async (t) => {
  // Warm every cache first: the refusal must not wait for a TTL.
  t.equal((await agentMe(a)).statusCode, 200);
  t.equal((await mcpList(a)).statusCode, 200);
  t.equal((await companies(a)).statusCode, 200);
  t.equal((await keys(a)).statusCode, 200);

  const script = spawnEntry(t, 'ops/tenant-suspend.ts', testEnv(databaseUrl, { LOG_LEVEL: 'warn' }), {
    args: ['--tenant', a.tenantId, '--reason', 'abuse report 42'],
  });
  t.equal(await script.exited, 0, script.output());
  t.match(script.output(), new RegExp(`^tenant ${a.tenantId} is suspended since [^\\n]+\\n$`), 'the sentence alone');
  t.match(
    await db.oneFirst(sql.unsafe`select suspended_reason from tenants where id = ${a.tenantId}`),
    /^operator .+: abuse report 42$/,
  );

  const refused = await waitFor('the agent refused', async () => {
    const res = await agentMe(a);
    return res.statusCode === 403 ? res : null;
  });
  t.match(refused.json(), { code: 'tenant_inactive', next_action: 'restore_account_access' });
  const caps = await app.inject({
    url: '/api/agent/v1/capabilities',
    headers: { authorization: `Bearer ${a.agent.token}` },
  });
  t.equal(caps.json().code, 'tenant_inactive', 'capabilities too');
  const viaMcp = await mcpList(a);
  t.equal(viaMcp.statusCode, 403);
  t.match(viaMcp.json(), { code: 'tenant_inactive' });
  const person = await waitFor('the person refused', async () => {
    const res = await companies(a);
    return res.statusCode === 403 ? res : null;
  });
  t.match(person.json(), { error: 'tenant_inactive', status: 403 });
  t.match((await keys(a)).json(), { error: 'tenant_inactive' }, 'the workspace without x-tenant-id too');

  t.equal((await agentMe(b)).statusCode, 200, 'another tenant is untouched');
  t.equal((await companies(b)).statusCode, 200);

  await resumeTenant(db, a.tenantId);
  await waitFor('the agent back', async () => (await agentMe(a)).statusCode === 200);
  await waitFor('the person back', async () => (await companies(a)).statusCode === 200);
  t.equal((await keys(a)).statusCode, 200);
});

t.test('the script refuses to suspend without a reason', async (t) => {
  const noReason = spawnEntry(t, 'ops/tenant-suspend.ts', testEnv(databaseUrl, { LOG_LEVEL: 'warn' }), {
    args: ['--tenant', a.tenantId],
  });
  t.not(await noReason.exited, 0);
  t.match(noReason.output(), /--reason is required/);
  t.equal(await db.oneFirst(sql.unsafe`select suspended_at from tenants where id = ${a.tenantId}`), null);
});

t.test('identity_conflict: a token naming another workspace than its registration', async (t) => {
  const forged = await signAccessToken(
    app.idpKeys,
    config.authUrl,
    resources(config.baseUrl).agent,
    {
      principalId: a.agent.principalId,
      registrationId: a.agent.registrationId,
      tenantId: b.tenantId,
      scopes: [...AGENT_SCOPES],
    },
    300,
  );
  const res = await app.inject({ url: '/api/agent/v1/boards', headers: { authorization: `Bearer ${forged}` } });
  t.equal(res.statusCode, 401);
  t.match(res.json(), { code: 'identity_conflict', next_action: 'reauthenticate' });
  t.match(res.headers['www-authenticate'], /error="invalid_token"/);
});
