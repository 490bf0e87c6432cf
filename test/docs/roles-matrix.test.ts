// The roles matrix: docs/accounts-and-tenants.md holds exactly the table
// made from the routes' declared roles (api/roles-matrix.ts), and every cell
// of it holds over HTTP: for each tenant-scoped operation and each role, an
// allowed role is not refused (not 403) and a refused one gets 403 naming
// the role needed. `UPDATE_DOCS=1 npm test -- test/docs/roles-matrix.test.ts`
// rewrites the page's table after a route's role changed. The Agent API's
// matrix (what a claimed agent may do for each role of its claimer) is
// checked the same way, with agents claimed by an Admin, a Member and a Viewer.
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import t, { type Test } from 'tap';
import {
  AGENT_MATRIX_END,
  AGENT_MATRIX_START,
  agentRolesMatrix,
  MATRIX_END,
  MATRIX_START,
  matrixRows,
  rolesMatrix,
} from '../../api/roles-matrix.ts';
import { roleAtLeast, roleNeeded, TENANT_ROLES, type TenantRole } from '../../core/tenants/roles.ts';
import { validParts } from '../fuzz/generate.ts';
import { buildTestApp } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { loadOperations, urlOf, CLOSED_UPSTREAMS, type Operation } from '../helpers/openapi-ops.ts';
import { sourceRoot } from '../helpers/paths.ts';
import { agentClaimedBy, createWorkspace } from '../helpers/principals.ts';

const databaseUrl = await createTestDatabase(t);
const { app, db, config } = await buildTestApp(t, databaseUrl, {
  ...CLOSED_UPSTREAMS,
  AGENT_API_RATE_LIMIT: '1000000',
});
const doc = (await app.inject({ url: '/openapi.json' })).json();
const rows = matrixRows(doc);
const agentRows = matrixRows(doc, 'x-claimer-role');

/** One valid request of `op` (an empty JSON body where it takes one): what is refused is the role, not the input. */
function tryOperation(op: Operation, known: Parameters<typeof validParts>[2], auth: Record<string, string>) {
  const parts = validParts(op, 1, known, true);
  return app.inject({
    method: op.method as 'GET',
    url: urlOf(op, parts.path, parts.query),
    headers: { ...parts.headers, ...auth, ...(op.body ? { 'content-type': 'application/json' } : {}) },
    ...(op.body ? { payload: '{}' } : {}),
  });
}

/** The page holds exactly `made` between the markers (UPDATE_DOCS=1 rewrites it). */
function checkBlock(t: Test, startMarker: string, endMarker: string, made: string) {
  const file = path.join(sourceRoot, 'docs/accounts-and-tenants.md');
  const page = readFileSync(file, 'utf8');
  const start = page.indexOf(startMarker);
  const end = page.indexOf(endMarker);
  t.ok(start >= 0 && end > start, 'the page has the matrix markers');
  const written = page.slice(start, end + endMarker.length);
  if (process.env.UPDATE_DOCS === '1' && written !== made) writeFileSync(file, page.replace(written, made));
  else t.equal(written, made, 'the matrix is as the routes declare (UPDATE_DOCS=1 rewrites it)');
}

t.test('docs/accounts-and-tenants.md carries the matrix made from the routes', async (t) => {
  checkBlock(t, MATRIX_START, MATRIX_END, rolesMatrix(doc));
  t.ok(rows.length > 80, `${rows.length} tenant-scoped operations`);
  t.same(
    [...new Set(rows.map((r) => r.role))].sort(),
    ['admin', 'member', 'viewer'],
    'every role is declared somewhere',
  );
});

t.test('each role, each operation: allowed is not refused, refused is 403 naming the role', async (t) => {
  const w = await createWorkspace(app, db, config);
  const job = await app.inject({
    method: 'POST',
    url: '/api/tenants/jobs',
    headers: { authorization: `Bearer ${w.admin.token}`, 'x-tenant-id': w.tenantId },
    payload: { kind: 'diag.noop' },
  });
  const known = { tenantId: w.tenantId, ids: { jobId: [job.json().id as string] } };
  const people: Record<TenantRole, string> = { admin: w.admin.token, member: w.member.token, viewer: w.viewer.token };
  const operations = new Map((await loadOperations(app)).map((op) => [op.key, op]));
  // Leaving works for every role: walked last, so nobody leaves before the rest is walked.
  const ordered = [...rows].sort(
    (a, b) => Number(a.operationId === 'leaveTenant') - Number(b.operationId === 'leaveTenant'),
  );
  const wrong: string[] = [];
  let checked = 0;
  for (const row of ordered) {
    const op = operations.get(`${row.method} ${row.path}`)!;
    for (const role of ['viewer', 'member', 'admin'] as const) {
      const res = await tryOperation(op, known, { authorization: `Bearer ${people[role]}`, 'x-tenant-id': w.tenantId });
      checked++;
      const allowed = roleAtLeast(role, row.role);
      const refusedRight = res.statusCode === 403 && res.json().message === roleNeeded(row.role);
      if (allowed ? res.statusCode === 403 : !refusedRight)
        wrong.push(
          `${role} ${row.method} ${row.path} (needs ${row.role}): ${res.statusCode} ${res.body.slice(0, 200)}`,
        );
    }
  }
  t.same(wrong, [], `${checked} requests as the matrix says`);
  t.equal(checked, rows.length * TENANT_ROLES.length);
});

t.test("the Agent API's matrix: what a claimed agent may do for each role of its claimer", async (t) => {
  checkBlock(t, AGENT_MATRIX_START, AGENT_MATRIX_END, agentRolesMatrix(doc));
  const agentPaths = Object.entries(doc.paths as Record<string, Record<string, unknown>>)
    .filter(([p]) => p.startsWith('/api/agent/v1/'))
    .flatMap(([p, item]) => Object.keys(item).map((m) => `${m.toUpperCase()} ${p}`));
  t.same(
    agentRows.map((r) => `${r.method} ${r.path}`).sort(),
    agentPaths.sort(),
    `each of the ${agentPaths.length} Agent API operations declares its claimer role`,
  );
  t.same(
    [...new Set(agentRows.map((r) => r.role))].sort(),
    ['admin', 'member', 'viewer'],
    'every claimer role is needed somewhere',
  );
  const w = await createWorkspace(app, db, config);
  const agents: Record<TenantRole, string> = {
    admin: (await agentClaimedBy(app, db, config, w, w.admin)).token,
    member: (await agentClaimedBy(app, db, config, w, w.member)).token,
    viewer: (await agentClaimedBy(app, db, config, w, w.viewer)).token,
  };
  const operations = new Map((await loadOperations(app)).map((op) => [op.key, op]));
  const wrong: string[] = [];
  let checked = 0;
  for (const row of agentRows) {
    const op = operations.get(`${row.method} ${row.path}`)!;
    for (const role of TENANT_ROLES) {
      const res = await tryOperation(
        op,
        { tenantId: w.tenantId, ids: {} },
        { authorization: `Bearer ${agents[role]}` },
      );
      checked++;
      const refused = res.statusCode === 403 && res.json().code === 'insufficient_role';
      if (roleAtLeast(role, row.role) === refused)
        wrong.push(
          `${role}'s agent ${row.method} ${row.path} (needs ${row.role}): ${res.statusCode} ${res.body.slice(0, 200)}`,
        );
    }
  }
  t.same(wrong, [], `${checked} requests as the matrix says`);
  t.equal(checked, agentRows.length * TENANT_ROLES.length);
});
