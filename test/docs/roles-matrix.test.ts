// The roles matrix: docs/accounts-and-tenants.md holds exactly the table
// made from the routes' declared roles (api/roles-matrix.ts), and every cell
// of it holds over HTTP: for each tenant-scoped operation and each role, an
// allowed role is not refused (not 403) and a refused one gets 403 naming
// the role needed. `UPDATE_DOCS=1 npm test -- test/docs/roles-matrix.test.ts`
// rewrites the page's table after a route's role changed.
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { MATRIX_END, MATRIX_START, matrixRows, rolesMatrix } from '../../api/roles-matrix.ts';
import { roleAtLeast, roleNeeded, TENANT_ROLES, type TenantRole } from '../../core/tenants/roles.ts';
import { validParts } from '../fuzz/generate.ts';
import { buildTestApp } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { loadOperations, urlOf, CLOSED_UPSTREAMS } from '../helpers/openapi-ops.ts';
import { sourceRoot } from '../helpers/paths.ts';
import { createWorkspace } from '../helpers/principals.ts';

const databaseUrl = await createTestDatabase(t);
const { app, db, config } = await buildTestApp(t, databaseUrl, CLOSED_UPSTREAMS);
const doc = (await app.inject({ url: '/openapi.json' })).json();
const rows = matrixRows(doc);

t.test('docs/accounts-and-tenants.md carries the matrix made from the routes', async (t) => {
  const file = path.join(sourceRoot, 'docs/accounts-and-tenants.md');
  const page = readFileSync(file, 'utf8');
  const start = page.indexOf(MATRIX_START);
  const end = page.indexOf(MATRIX_END);
  t.ok(start >= 0 && end > start, 'the page has the matrix markers');
  const written = page.slice(start, end + MATRIX_END.length);
  const made = rolesMatrix(doc);
  if (process.env.UPDATE_DOCS === '1' && written !== made) writeFileSync(file, page.replace(written, made));
  else t.equal(written, made, 'the matrix is as the routes declare (UPDATE_DOCS=1 rewrites it)');
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
      const parts = validParts(op, 1, known, true);
      const res = await app.inject({
        method: op.method as 'GET',
        url: urlOf(op, parts.path, parts.query),
        headers: {
          ...parts.headers,
          authorization: `Bearer ${people[role]}`,
          'x-tenant-id': w.tenantId,
          ...(op.body ? { 'content-type': 'application/json' } : {}),
        },
        ...(op.body ? { payload: '{}' } : {}),
      });
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
