// Platform company routes: Admin writes, Viewer reads, another tenant's ids
// are 404, keyset pages, and a run that a real worker executes (its job
// visible at GET /api/jobs/:jobId, its output on the run).
import { randomUUID } from 'node:crypto';
import t from 'tap';
import { z } from 'zod';
import { signPlatformToken } from '../../../../core/auth/platform-token.ts';
import { sql } from '../../../../core/db/pool.ts';
import { buildTestApp } from '../../../helpers/app.ts';
import { TEST_SECRET } from '../../../helpers/config.ts';
import { createTestDatabase } from '../../../helpers/db.ts';
import { createMember, type Member } from '../../../helpers/fixtures.ts';
import { startTestWorker } from '../../../helpers/worker.ts';
import { waitFor } from '../../../helpers/wait.ts';

const databaseUrl = await createTestDatabase(t);
const { app, db } = await buildTestApp(t, databaseUrl);

const admin = await createMember(db, 'admin');
const stranger = await createMember(db, 'admin');
// A Viewer of the admin's tenant.
const viewerId = randomUUID();
await db.query(sql.unsafe`insert into users (id, email) values (${viewerId}, ${`${viewerId}@example.test`})`);
await db.query(
  sql.unsafe`insert into tenant_memberships (tenant_id, user_id, role) values (${admin.tenantId}, ${viewerId}, 'viewer')`,
);
const viewer: Member = {
  tenantId: admin.tenantId,
  userId: viewerId,
  token: await signPlatformToken({ userId: viewerId }, Buffer.from(TEST_SECRET, 'base64'), 'http://localhost:3000'),
};

type Method = 'GET' | 'POST' | 'PATCH' | 'DELETE';
const call = (who: Member, method: Method, url: string, payload?: object) =>
  app.inject({
    method,
    url,
    headers: { authorization: `Bearer ${who.token}`, 'x-tenant-id': who.tenantId },
    ...(payload ? { payload } : {}),
  });

t.test('companies: create, read, page, update, delete; roles and tenants', async (t) => {
  const created = await call(admin, 'POST', '/api/companies', { name: 'Acme', description: 'Anvils' });
  t.equal(created.statusCode, 201);
  const id = created.json().id;
  t.match(created.json(), { name: 'Acme', description: 'Anvils', createdAt: String });
  t.equal((await call(viewer, 'POST', '/api/companies', { name: 'No' })).statusCode, 403, 'a Viewer cannot write');
  t.match((await call(viewer, 'GET', `/api/companies/${id}`)).json(), { id, name: 'Acme' });
  const foreign = await call(stranger, 'GET', `/api/companies/${id}`);
  t.equal(foreign.statusCode, 404);
  t.same(Object.keys(foreign.json()).sort(), ['error', 'message', 'status']);
  t.equal((await call(stranger, 'PATCH', `/api/companies/${id}`, { name: 'Mine' })).statusCode, 404);
  t.equal((await call(stranger, 'DELETE', `/api/companies/${id}`)).statusCode, 404);
  t.equal((await call(admin, 'POST', '/api/companies', { name: '' })).statusCode, 400);

  for (let i = 0; i < 4; i++) await call(admin, 'POST', '/api/companies', { name: `Co ${i}` });
  const ids: string[] = [];
  let cursor: string | null = null;
  do {
    const page: { items: Array<{ id: string }>; nextCursor: string | null } = (
      await call(viewer, 'GET', `/api/companies?limit=2${cursor ? `&cursor=${cursor}` : ''}`)
    ).json();
    ids.push(...page.items.map((c) => c.id));
    cursor = page.nextCursor;
  } while (cursor);
  t.equal(ids.length, 5);
  t.equal(new Set(ids).size, 5);
  t.equal((await call(stranger, 'GET', '/api/companies')).json().items.length, 0);
  t.match((await call(admin, 'GET', '/api/companies?cursor=nope')).json(), { error: 'invalid_request', status: 400 });
  const crafted = Buffer.from(
    JSON.stringify({ t: '2024-13-45 00:00:00+00', id: '00000000-0000-4000-8000-000000000000' }),
  ).toString('base64url');
  t.match(
    (await call(admin, 'GET', `/api/companies?cursor=${crafted}`)).json(),
    { error: 'invalid_request', status: 400 },
    'an impossible instant in a well-formed cursor',
  );

  t.match((await call(admin, 'PATCH', `/api/companies/${id}`, { description: 'Anvils and more' })).json(), {
    name: 'Acme',
    description: 'Anvils and more',
  });
  t.equal((await call(admin, 'DELETE', `/api/companies/${id}`)).statusCode, 204);
  t.equal((await call(admin, 'GET', `/api/companies/${id}`)).statusCode, 404);
});

t.test('agents and tasks of a company', async (t) => {
  const company = (await call(admin, 'POST', '/api/companies', { name: 'Beta' })).json();
  const other = (await call(admin, 'POST', '/api/companies', { name: 'Gamma' })).json();
  const base = `/api/companies/${company.id}`;
  const agent = await call(admin, 'POST', `${base}/agents`, { name: 'Planner', role: 'Plans the week' });
  t.equal(agent.statusCode, 201);
  t.match(agent.json(), { companyId: company.id, model: 'builtin/offline', status: 'active' });
  t.equal((await call(admin, 'POST', `${base}/agents`, { name: 'X', model: 'nosuch/model' })).statusCode, 400);
  t.equal((await call(stranger, 'POST', `${base}/agents`, { name: 'X' })).statusCode, 404);
  t.match((await call(admin, 'PATCH', `${base}/agents/${agent.json().id}`, { status: 'paused' })).json(), {
    status: 'paused',
    name: 'Planner',
  });
  t.equal(
    (await call(admin, 'PATCH', `/api/companies/${other.id}/agents/${agent.json().id}`, { name: 'Y' })).statusCode,
    404,
  );
  t.match((await call(viewer, 'GET', `${base}/agents`)).json(), { items: [{ id: agent.json().id }], nextCursor: null });

  const otherAgent = (await call(admin, 'POST', `/api/companies/${other.id}/agents`, { name: 'Elsewhere' })).json();
  t.equal(
    (await call(admin, 'POST', `${base}/tasks`, { title: 'T', assignedAgentId: otherAgent.id })).statusCode,
    400,
    "another company's agent",
  );
  const task = await call(admin, 'POST', `${base}/tasks`, { title: 'Plan', assignedAgentId: agent.json().id });
  t.equal(task.statusCode, 201);
  t.match(task.json(), { status: 'open', assignedAgentId: agent.json().id });
  t.match(
    (await call(admin, 'PATCH', `${base}/tasks/${task.json().id}`, { status: 'done', assignedAgentId: null })).json(),
    { status: 'done', assignedAgentId: null, title: 'Plan' },
  );
  t.match((await call(viewer, 'GET', `${base}/tasks`)).json(), { items: [{ id: task.json().id }] });
  t.equal((await call(stranger, 'GET', `${base}/tasks`)).statusCode, 404);
  t.equal((await call(viewer, 'PATCH', `${base}/tasks/${task.json().id}`, { status: 'open' })).statusCode, 403);
});

t.test('a run: 202 with run and job, executed by a real worker', async (t) => {
  await startTestWorker(t, databaseUrl);
  const company = (await call(admin, 'POST', '/api/companies', { name: 'Delta' })).json();
  const base = `/api/companies/${company.id}`;
  const agent = (await call(admin, 'POST', `${base}/agents`, { name: 'Writer', role: 'Writes' })).json();
  const task = (
    await call(admin, 'POST', `${base}/tasks`, { title: 'Draft the memo', description: 'Two lines' })
  ).json();

  const started = await call(admin, 'POST', `${base}/tasks/${task.id}/runs`, { agentId: agent.id });
  t.equal(started.statusCode, 202);
  const { run, job } = started.json();
  t.match(run, { taskId: task.id, agentId: agent.id, jobId: job.id });
  t.match(job, { id: run.jobId, kind: 'company.run' });
  t.equal(started.headers.location, `/api/jobs/${job.id}`);

  let last: unknown = null;
  const finished = await waitFor('the run job to succeed', async () => {
    const res = await call(viewer, 'GET', `/api/jobs/${job.id}`);
    last = res.json();
    return res.json().status === 'succeeded' ? res.json() : null;
  }).catch(async (error: Error) => {
    // Graphile's view has no is_available: read its table.
    const graphile = await db.any(sql.unsafe`
      select g.id, k.identifier, g.run_at, now() as now, g.locked_by, g.locked_at, g.attempts, g.last_error, g.is_available
      from graphile_worker._private_jobs g join graphile_worker._private_tasks k on k.id = g.task_id`);
    const workers = await db.any(sql.unsafe`select * from worker_heartbeats`);
    throw new Error(
      `${error.message}; the job: ${JSON.stringify(last)}; graphile: ${JSON.stringify(graphile)}; workers: ${JSON.stringify(workers)}`,
    );
  });
  t.match(finished, {
    kind: 'company.run',
    result: { runId: run.id, model: 'builtin/offline', output: /Draft the memo/ },
  });
  t.equal((await call(stranger, 'GET', `/api/jobs/${job.id}`)).statusCode, 404);
  const stored = await db.one(
    sql.type(
      z.object({ status: z.string(), output: z.string().nullable() }),
    )`select status, output from company_runs where id = ${run.id}`,
  );
  t.equal(stored.status, 'succeeded', 'the run mirrors its job');
  t.match(stored.output, /Draft the memo/);
  t.match((await call(viewer, 'GET', `${base}/tasks`)).json(), { items: [{ id: task.id, status: 'in_progress' }] });

  // Refusals.
  t.equal((await call(viewer, 'POST', `${base}/tasks/${task.id}/runs`, { agentId: agent.id })).statusCode, 403);
  t.equal((await call(stranger, 'POST', `${base}/tasks/${task.id}/runs`, { agentId: agent.id })).statusCode, 404);
  const foreignAgent = (await call(stranger, 'POST', '/api/companies', { name: 'S' })).json();
  t.equal((await call(admin, 'POST', `${base}/tasks/${task.id}/runs`, { agentId: foreignAgent.id })).statusCode, 400);
  await call(admin, 'PATCH', `${base}/agents/${agent.id}`, { status: 'paused' });
  t.match((await call(admin, 'POST', `${base}/tasks/${task.id}/runs`, { agentId: agent.id })).json(), {
    status: 409,
    error: 'agent_paused',
  });
  await call(admin, 'PATCH', `${base}/agents/${agent.id}`, { status: 'active' });
  await call(admin, 'PATCH', `${base}/tasks/${task.id}`, { status: 'done' });
  t.match((await call(admin, 'POST', `${base}/tasks/${task.id}/runs`, { agentId: agent.id })).json(), {
    status: 409,
    error: 'task_closed',
  });
});
