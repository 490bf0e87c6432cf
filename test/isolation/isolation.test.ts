// Isolation suite: every tenant- or user-scoped operation of /openapi.json is
// tried against tenant A's resources as another tenant B (B's own tenant
// header with A's ids, and A's tenant id in B's x-tenant-id) and, for
// changes, as A's Viewer and (for an Admin's changes) A's Member: 404/403,
// none of A's data in the answer, none of A's rows changed. Which changes a
// role may make is what the route declares (x-tenant-role); on the Agent
// API, agents claimed by A's Viewer and A's Member are tried on what their
// claimer's role does not allow (x-claimer-role): 403 and nothing changed. An operation that cannot be tried generically must be
// classified below with its reason, or the suite fails naming it. The
// websocket and the MCP tools are tried in ws-mcp.test.ts.
import t from 'tap';
import { buildTestApp } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { tenantFingerprinter } from '../helpers/db-fingerprint.ts';
import { CLOSED_UPSTREAMS, loadOperations, type Operation } from '../helpers/openapi-ops.ts';
import { sql } from '../../core/db/pool.ts';
import { roleAtLeast } from '../../core/tenants/roles.ts';
import { agentClaimedBy, createWorkspace } from '../helpers/principals.ts';
import { createAttempts, NAME_PARAMS, type Attempt } from './attempts.ts';
import { createResources } from './fixtures.ts';

const SEED = Number(process.env.ISOLATION_SEED ?? 1806);
const SCOPED_SCHEMES = ['PlatformJWT', 'AgentBearer', 'RunnerToken', 'DashboardJWT'];

/** Scoped operations not tried generically, each with the reason (and where it is covered instead). */
const CLASSIFIED: Record<string, string> = {
  listContacts:
    'operator only: contact submissions belong to no tenant (a tenant Admin gets 403: test/api/routes/contact)',
  updateContact: 'operator only: contact submissions belong to no tenant',
  deleteContact: 'operator only: contact submissions belong to no tenant',
  acknowledgeRunnerWork: "needs work dispatched to A's runner (runner tokens are per runner: test/api/routes/runners)",
  getAgentCompanyRun:
    "needs a run of A's (runs need a runner): getAgentCompanyTask covers A's refs on the same route family",
  deleteSkillRegistrationRetired: 'retired route: answers 410 to everyone',
  publishSkill: 'skills come from SKILLS_DIR, none in this test (test/api/routes/skills)',
  unpublishSkill: 'skills come from SKILLS_DIR, none in this test (test/api/routes/skills)',
  setSkillEnvSchema: 'skills come from SKILLS_DIR, none in this test (test/api/routes/skills)',
  configureSkill: 'skills come from SKILLS_DIR, none in this test (test/api/routes/skills)',
  resetSkillConfiguration: 'skills come from SKILLS_DIR, none in this test (test/api/routes/skills)',
};

const databaseUrl = await createTestDatabase(t);
const { app, db, config } = await buildTestApp(t, databaseUrl, {
  AGENT_API_RATE_LIMIT: '1000000',
  ...CLOSED_UPSTREAMS,
});
const operations = await loadOperations(app);
// Both tenants on the top plan, so no plan gate answers before the isolation checks do.
const workspace = async () => {
  const w = await createWorkspace(app, db, config);
  await db.query(sql.unsafe`update tenants set plan = 'enterprise' where id = ${w.tenantId}`);
  return w;
};
const a = await workspace();
const resources = await createResources(app, db, a);
const watch = await tenantFingerprinter(t, databaseUrl, a.tenantId, [a.admin.userId, a.member.userId, a.viewer.userId]);
const attempt = createAttempts(app, resources, watch, SEED);
// A as its Viewer's and its Member's claimed agents see it (their token acts in A).
const claimedAgents = {
  viewer: { ...a, agent: await agentClaimedBy(app, db, config, a, a.viewer) },
  member: { ...a, agent: await agentClaimedBy(app, db, config, a, a.member) },
};

const scoped = (op: Operation) =>
  op.security.some((s) => SCOPED_SCHEMES.includes(s)) || op.params.some((p) => p.name === 'x-tenant-id');
const pathParams = (op: Operation) => op.params.filter((p) => p.in === 'path');

/** A's value for a path parameter of the operation, if A has one. */
function valueFor(op: Operation, name: string): string | undefined {
  if (name === 'id' && op.path.startsWith('/api/managed-agents/')) return resources.byParam.agentRef;
  if (name === 'id' && op.path.startsWith('/api/activity/sessions/')) return resources.byParam.sessionId;
  if (name === 'channel') return 'webhook';
  return resources.byParam[name];
}

const started = Date.now();
const results = new Map<string, Attempt[]>();
const unclassified: string[] = [];
const statuses = new Map<string, number>();

for (const op of operations.filter(scoped)) {
  if (CLASSIFIED[op.id]) continue;
  const values = Object.fromEntries(pathParams(op).map((p) => [p.name, valueFor(op, p.name)]));
  if (Object.values(values).some((v) => v === undefined)) {
    unclassified.push(
      `${op.id} (${op.key}): no value of A's for ${Object.keys(values)
        .filter((k) => !values[k])
        .join(', ')}`,
    );
    continue;
  }
  const pathValues = values as Record<string, string>;
  const namesA = pathParams(op).some((p) => !NAME_PARAMS.has(p.name));
  const hasTenant = op.params.some((p) => p.name === 'x-tenant-id');
  const b = await workspace(); // fresh: B's own changes (even deleting its account) touch nothing later
  const attempts: Attempt[] = [];
  attempts.push(
    await attempt(
      op,
      'B with A ids',
      b,
      b.admin,
      hasTenant ? b.tenantId : null,
      pathValues,
      namesA ? [403, 404] : null,
    ),
  );
  if (hasTenant)
    attempts.push(await attempt(op, "B naming A's tenant", b, b.admin, a.tenantId, pathValues, [403, 404]));
  const changes = hasTenant && op.method !== 'GET';
  if (changes && op.tenantRole !== 'viewer')
    attempts.push(await attempt(op, "A's Viewer", a, a.viewer, a.tenantId, pathValues, [403]));
  if (changes && op.tenantRole === 'admin')
    attempts.push(await attempt(op, "A's Member", a, a.member, a.tenantId, pathValues, [403]));
  // The agent-per-claimer-role matrix: what the claimer may not do, their agent may not either.
  for (const role of ['viewer', 'member'] as const) {
    if (op.claimerRole && !roleAtLeast(role, op.claimerRole))
      attempts.push(await attempt(op, `A's ${role}'s agent`, claimedAgents[role], a[role], null, pathValues, [403]));
  }
  results.set(op.key, attempts);
  for (const x of attempts) statuses.set(`${x.who} ${x.status}`, (statuses.get(`${x.who} ${x.status}`) ?? 0) + 1);
}

t.test('every scoped operation is tried or classified', async (t) => {
  t.same(
    unclassified,
    [],
    'scoped operations neither tried nor classified (add fixtures for A, or a CLASSIFIED entry with the reason)',
  );
  const ids = new Set(operations.map((o) => o.id));
  t.same(
    Object.keys(CLASSIFIED).filter((id) => !ids.has(id)),
    [],
    'classified operations that no longer exist',
  );
});

t.test("no other caller reads or changes A's resources", async (t) => {
  for (const [key, attempts] of results)
    for (const x of attempts) for (const p of x.problems) t.fail(`${key} as ${x.who}: ${p}`);
  t.pass('judged');
});

t.test('summary', async (t) => {
  const tried = results.size;
  const count = [...results.values()].reduce((n, x) => n + x.length, 0);
  t.comment(
    `isolation: seed ${SEED}, ${operations.filter(scoped).length} scoped operations, ${tried} tried, ${Object.keys(CLASSIFIED).length} classified, ${count} requests, ${Math.round((Date.now() - started) / 1000)} s`,
  );
  t.comment(
    `statuses: ${[...statuses]
      .sort()
      .map(([k, n]) => `${k}: ${n}`)
      .join(', ')}`,
  );
  t.ok(tried > 80, 'most scoped operations are tried');
  // Every Agent API change a Viewer may not make, and every one only an Admin may, was tried by the claimer's agent.
  const byAgents = (who: string) =>
    [...results.values()].flat().filter((x) => x.who === who && x.status === 403).length;
  const needs = (above: 'viewer' | 'member') =>
    operations.filter((op) => op.claimerRole && !roleAtLeast(above, op.claimerRole) && !CLASSIFIED[op.id]).length;
  t.equal(byAgents("A's viewer's agent"), needs('viewer'), "A's Viewer's agent refused every change");
  t.equal(byAgents("A's member's agent"), needs('member'), "A's Member's agent refused every Admin's change");
  t.ok(needs('member') > 0 && needs('viewer') > needs('member'), 'the claimer roles differ somewhere');
});
