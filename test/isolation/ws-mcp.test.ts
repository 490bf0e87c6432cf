// Isolation beyond /openapi.json: the job websocket (/api/ws) and every MCP
// tool. Another tenant B subscribes to A's job (not_found, no job event) and
// calls each tool with A's refs (a refusal or B's own data; none of A's
// values in the answer, none of A's rows changed). Agents claimed by A's
// Viewer and A's Member call each tool their claimer's role does not allow
// (x-claimer-role): insufficient_role, none of A's rows changed.
import t from 'tap';
import { signAccessToken, AGENT_SCOPES } from '../../core/identity/tokens.ts';
import { sql } from '../../core/db/pool.ts';
import { startTestServer } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { injectMcp } from '../helpers/mcp.ts';
import { tenantFingerprinter } from '../helpers/db-fingerprint.ts';
import { roleAtLeast } from '../../core/tenants/roles.ts';
import { CLOSED_UPSTREAMS, loadOperations } from '../helpers/openapi-ops.ts';
import { agentClaimedBy, createWorkspace, type Workspace } from '../helpers/principals.ts';
import { TestSocket } from '../helpers/ws.ts';
import { seedOf } from '../fuzz/generate.ts';
import { createResources } from './fixtures.ts';

const SEED = Number(process.env.ISOLATION_SEED ?? 1806);
const databaseUrl = await createTestDatabase(t);
const { app, db, config, wsUrl } = await startTestServer(t, databaseUrl, {
  AGENT_API_RATE_LIMIT: '1000000',
  ...CLOSED_UPSTREAMS,
});
const workspace = async () => {
  const w = await createWorkspace(app, db, config);
  await db.query(sql.unsafe`update tenants set plan = 'enterprise' where id = ${w.tenantId}`);
  return w;
};
const a = await workspace();
const b = await workspace();
const resources = await createResources(app, db, a);
const watch = await tenantFingerprinter(t, databaseUrl, a.tenantId, [a.admin.userId, a.viewer.userId]);
const jobId = resources.byParam.jobId!;

t.test("/api/ws: B's subscription to A's job is not_found; A's own is answered", async (t) => {
  const other = await TestSocket.connect(wsUrl, b.admin.token);
  t.teardown(() => other.ws.close());
  await other.next((m) => m.type === 'ready');
  other.send({ type: 'subscribe', jobId });
  const refused = await other.next((m) => m.type === 'error' || m.type === 'job');
  t.match(refused, { type: 'error', code: 'not_found', jobId });
  const owner = await TestSocket.connect(wsUrl, a.admin.token);
  t.teardown(() => owner.ws.close());
  await owner.next((m) => m.type === 'ready');
  owner.send({ type: 'subscribe', jobId });
  t.match(
    await owner.next((m) => m.type === 'job' || m.type === 'error'),
    { type: 'job', job: { id: jobId } },
    'positive control',
  );
  t.notOk(
    other.messages.some((m) => m.type === 'job'),
    'B saw no job event',
  );
  t.notOk(
    other.messages.some((m) => JSON.stringify(m).includes('A-message-secret')),
    "no A value on B's socket",
  );
});

async function mcp(w: Workspace, method: string, params: object) {
  const claims = {
    principalId: w.agent.principalId,
    registrationId: w.agent.registrationId,
    tenantId: w.tenantId,
    scopes: [...AGENT_SCOPES],
  };
  const token = await signAccessToken(app.idpKeys, config.authUrl, `${config.baseUrl}/mcp`, claims, 600);
  const res = await injectMcp(app, token, method, params);
  return { status: res.statusCode, body: res.body };
}

type Tool = { name: string; inputSchema: { properties?: Record<string, unknown>; required?: string[] } };

async function toolsOf(w: Workspace): Promise<Tool[]> {
  const list = await mcp(w, 'tools/list', {});
  if (list.status !== 200) throw new Error(`tools/list: ${list.status} ${list.body}`);
  return JSON.parse(list.body).result.tools as Tool[];
}

/** A tool's arguments naming A's resources (and the minimum body that passes validation). */
function argsFor(tool: Tool, keyPrefix = 'isolation'): Record<string, unknown> {
  const args: Record<string, unknown> = {};
  for (const name of Object.keys(tool.inputSchema.properties ?? {})) {
    if (name === 'idempotency_key') args[name] = `${keyPrefix}-${seedOf(SEED, tool.name)}`;
    else if (resources.byParam[name]) args[name] = resources.byParam[name];
    else if (name === 'agentRef') args[name] = resources.byParam.agentRef;
  }
  if (tool.name === 'publishInsightBoard') args.visibility = 'public';
  if (tool.name === 'saveInsightBoardVersion') args.content = { widgets: [] };
  return args;
}

t.test("MCP: every tool called by B with A's refs", async (t) => {
  const tools = await toolsOf(b);
  t.ok(tools.length > 10, `${tools.length} tools`);
  const outcomes = new Map<string, number>();
  for (const tool of tools) {
    const args = argsFor(tool);
    const before = await watch.take();
    const res = await mcp(b, 'tools/call', { name: tool.name, arguments: args });
    const changed = watch.changed(before, await watch.take());
    const result = JSON.parse(res.body).result as { isError?: boolean; content?: Array<{ text?: string }> } | undefined;
    const namesA = Object.keys(args).some((k) => k !== 'idempotency_key');
    const code = result?.isError ? (/"code":"([a-z_]+)"/.exec(result.content?.[0]?.text ?? '')?.[1] ?? 'error') : 'ok';
    outcomes.set(code, (outcomes.get(code) ?? 0) + 1);
    const leaked = resources.secrets.filter((s) => res.body.includes(s) && !JSON.stringify(args).includes(s));
    t.same(leaked, [], `${tool.name}: no A value in the answer`);
    t.same(changed, [], `${tool.name}: no A row changed`);
    if (namesA) t.ok(result?.isError, `${tool.name} with A's refs is refused: ${res.body.slice(0, 300)}`);
  }
  t.comment(
    `mcp: ${tools.length} tools called as B with A's refs: ${[...outcomes].map(([c, n]) => `${c} ${n}`).join(', ')}`,
  );
});

t.test("MCP: A's Viewer's and Member's agents call every tool their claimer's role does not allow", async (t) => {
  const roles = new Map((await loadOperations(app)).map((op) => [op.id, op.claimerRole]));
  const agents = {
    viewer: { ...a, agent: await agentClaimedBy(app, db, config, a, a.viewer) },
    member: { ...a, agent: await agentClaimedBy(app, db, config, a, a.member) },
  };
  const tools = await toolsOf(a);
  let refused = 0;
  for (const claimer of ['viewer', 'member'] as const) {
    for (const tool of tools) {
      const needs = roles.get(tool.name);
      t.ok(needs, `${tool.name} declares its claimer role`);
      if (!needs || roleAtLeast(claimer, needs)) continue;
      const args = argsFor(tool, `claimer-${claimer}`);
      // A valid board in A: only the claimer's role stands in the way.
      if (tool.name === 'createInsightBoard')
        Object.assign(args, { title: 'claimer-role', scope_type: 'company', scope_id: resources.byParam.companyId });
      const before = await watch.take();
      const res = await mcp(agents[claimer], 'tools/call', { name: tool.name, arguments: args });
      t.same(watch.changed(before, await watch.take()), [], `${claimer}'s agent ${tool.name}: no A row changed`);
      const result = JSON.parse(res.body).result as { isError?: boolean; content?: Array<{ text?: string }> };
      t.ok(result.isError, `${claimer}'s agent ${tool.name} is refused`);
      t.match(JSON.parse(result.content?.[0]?.text ?? '{}'), {
        code: 'insufficient_role',
        next_action: 'raise_claimer_role',
      });
      refused++;
    }
  }
  t.ok(refused >= 7, `${refused} tools refused for the claimer's role`);
});
