// Agent API company reads: the order of refusals (scope, claim, plan,
// input, tenant), bounds of every reference and paging parameter, keyset
// pages that survive concurrent inserts, and a run executed by a real worker.
import t from 'tap';
import { z } from 'zod';
import { sql } from '../../../../core/db/pool.ts';
import { createCompany, createCompanyAgent, createCompanyTask } from '../../../../core/companies/companies.ts';
import { startCompanyRun } from '../../../../core/companies/runs.ts';
import { createRegistration } from '../../../../core/identity/registrations.ts';
import type { AgentScope } from '../../../../core/identity/tokens.ts';
import { buildTestApp } from '../../../helpers/app.ts';
import { createTestDatabase } from '../../../helpers/db.ts';
import { startTestWorker } from '../../../helpers/worker.ts';
import { waitFor } from '../../../helpers/wait.ts';
import { markClaimed } from '../../../helpers/fixtures.ts';
import { agentAccessToken } from '../../../helpers/principals.ts';

const databaseUrl = await createTestDatabase(t);
const { app, db, config } = await buildTestApp(t, databaseUrl);

type Caller = { tenantId: string; get: (url: string) => Promise<Awaited<ReturnType<typeof app.inject>>> };

async function agent(opts: { claimed?: boolean; plan?: string; scopes?: AgentScope[] } = {}): Promise<Caller> {
  const { registration } = await createRegistration(db, { type: 'anonymous', ip: '127.0.0.1', claimTokenTtlS: 600 });
  if (opts.claimed ?? true) await markClaimed(db, registration.id);
  await db.query(sql.unsafe`update tenants set plan = ${opts.plan ?? 'pro'} where id = ${registration.tenant_id}`);
  const token = await agentAccessToken(app, config, registration, opts.scopes ?? ['svc:companies:read']);
  return {
    tenantId: registration.tenant_id,
    get: async (url) => app.inject({ url, headers: { authorization: `Bearer ${token}` } }),
  };
}

async function seed(tenantId: string) {
  const company = await createCompany(db, tenantId, null, { name: 'Acme', description: 'Makes anvils' });
  const member = (await createCompanyAgent(db, tenantId, company.id, {
    name: 'Writer',
    role: 'Writes release notes',
  }))!;
  const task = (await createCompanyTask(db, tenantId, company.id, {
    title: 'Write the notes',
    description: 'For 1.2',
    assignedAgentId: member.id,
  }))!;
  const { run, job } = await startCompanyRun(db, {
    tenantId,
    companyId: company.id,
    taskId: task.id,
    agentId: member.id,
  });
  return { company, member, task, run, job };
}

const me = await agent();
const mine = await seed(me.tenantId);
const other = await agent();
const theirs = await seed(other.tenantId);

t.test('happy paths: every read, with spec schema shapes', async (t) => {
  const c = mine.company.id;
  const list = await me.get('/api/agent/v1/companies');
  t.equal(list.statusCode, 200);
  t.same(
    list.json().items.map((i: { id: string }) => i.id),
    [c],
    'only the own tenant',
  );
  t.equal(list.json().next_cursor, null);
  t.match((await me.get(`/api/agent/v1/companies/${c}`)).json(), { id: c, name: 'Acme', description: 'Makes anvils' });
  t.match((await me.get(`/api/agent/v1/companies/${c}/agents`)).json(), {
    items: [{ id: mine.member.id, role: 'Writes release notes', model: 'builtin/offline', status: 'active' }],
    next_cursor: null,
  });
  t.match((await me.get(`/api/agent/v1/companies/${c}/tasks`)).json(), {
    items: [{ id: mine.task.id, status: 'in_progress', assigned_agent_id: mine.member.id }],
  });
  t.match((await me.get(`/api/agent/v1/companies/${c}/tasks/${mine.task.id}`)).json(), {
    id: mine.task.id,
    title: 'Write the notes',
  });
  t.match((await me.get(`/api/agent/v1/companies/${c}/runs`)).json(), {
    items: [{ id: mine.run.id, job_id: mine.job.id, task_id: mine.task.id }],
  });
  t.same(
    (await me.get(`/api/agent/v1/companies/${c}/runs?taskId=${theirs.task.id}`)).json(),
    { items: [], next_cursor: null },
    'filter by another task',
  );
  t.equal((await me.get(`/api/agent/v1/companies/${c}/runs?taskId=${mine.task.id}`)).json().items.length, 1);
  t.match((await me.get(`/api/agent/v1/companies/${c}/runs/${mine.run.id}`)).json(), {
    id: mine.run.id,
    status: String,
  });
});

t.test('claim first, then plan; scope before both', async (t) => {
  const unclaimedPro = await agent({ claimed: false });
  const unclaimedFree = await agent({ claimed: false, plan: 'free' });
  const claimedFree = await agent({ plan: 'free' });
  const noScope = await agent({ scopes: ['svc:boards:read'] });
  for (const path of ['/api/agent/v1/companies', `/api/agent/v1/companies/${mine.company.id}/runs`]) {
    const a = await unclaimedPro.get(path);
    t.equal(a.statusCode, 403);
    t.match(a.json(), { code: 'claim_required', next_action: 'claim_account' });
    t.equal((await unclaimedFree.get(path)).json().code, 'claim_required', 'the claim comes before the plan');
    const b = await claimedFree.get(path);
    t.equal(b.statusCode, 402);
    t.match(b.json(), { code: 'plan_required', next_action: 'change_plan' });
    const c = await noScope.get(path);
    t.equal(c.statusCode, 403);
    t.equal(c.json().code, 'scope_denied');
  }
  t.equal((await app.inject('/api/agent/v1/companies')).statusCode, 401);
});

t.test("another tenant's ids are not_found and never data", async (t) => {
  const c = theirs.company.id;
  const paths = [
    `/api/agent/v1/companies/${c}`,
    `/api/agent/v1/companies/${c}/agents`,
    `/api/agent/v1/companies/${c}/tasks`,
    `/api/agent/v1/companies/${c}/tasks/${theirs.task.id}`,
    `/api/agent/v1/companies/${c}/runs`,
    `/api/agent/v1/companies/${c}/runs/${theirs.run.id}`,
    `/api/agent/v1/companies/${mine.company.id}/tasks/${theirs.task.id}`,
    `/api/agent/v1/companies/${mine.company.id}/runs/${theirs.run.id}`,
    '/api/agent/v1/companies/not-a-uuid',
    `/api/agent/v1/companies/${mine.company.id}/tasks/x`,
    `/api/agent/v1/companies/${mine.company.id}/runs/x`,
  ];
  for (const path of paths) {
    const res = await me.get(path);
    t.equal(res.statusCode, 404, path);
    t.same(Object.keys(res.json()).sort(), ['code', 'message', 'next_action'], path);
    t.equal(res.json().code, 'not_found');
    t.notMatch(res.body, /Acme|anvil|Write the notes/);
  }
});

const craft = (t: string) =>
  Buffer.from(JSON.stringify({ t, id: '00000000-0000-4000-8000-000000000000' })).toString('base64url');
const CRAFTED = [
  '2024-13-01 00:00:00+00',
  '0000-01-01 00:00:00+00',
  '2024-02-30 10:00:00+00',
  '2024-01-01 25:00:00+00',
].map(craft);

t.test('400 invalid_request at every bound', async (t) => {
  const c = mine.company.id;
  const cases = [
    `/api/agent/v1/companies/${'a'.repeat(257)}`,
    `/api/agent/v1/companies/${'a'.repeat(257)}/tasks`,
    `/api/agent/v1/companies/${c}/tasks/${'a'.repeat(2049)}`,
    `/api/agent/v1/companies/${c}/runs/${'a'.repeat(257)}`,
    `/api/agent/v1/companies/${c}/runs?taskId=${'a'.repeat(257)}`,
    '/api/agent/v1/companies?limit=0',
    '/api/agent/v1/companies?limit=101',
    '/api/agent/v1/companies?limit=abc',
    '/api/agent/v1/companies?cursor=bm90LWEtY3Vyc29y',
    `/api/agent/v1/companies/${c}/runs?cursor=xyz`,
    `/api/agent/v1/companies/${c}/runs?taskId=x&cursor=xyz`,
    `/api/agent/v1/companies/${c}/agents?limit=1.5`,
    // Well-formed cursors with impossible instants (they once reached ::timestamptz and answered 500).
    ...CRAFTED.flatMap((cursor) => [
      `/api/agent/v1/companies?cursor=${cursor}`,
      `/api/agent/v1/companies/${c}/agents?cursor=${cursor}`,
      `/api/agent/v1/companies/${c}/tasks?cursor=${cursor}`,
      `/api/agent/v1/companies/${c}/runs?cursor=${cursor}`,
    ]),
  ];
  for (const path of cases) {
    const res = await me.get(path);
    t.equal(res.statusCode, 400, path.slice(0, 90));
    t.match(res.json(), { code: 'invalid_request', next_action: 'fix_request' });
  }
  // Just inside the bounds: not a 400.
  t.equal((await me.get(`/api/agent/v1/companies/${'a'.repeat(256)}`)).statusCode, 404);
  t.equal((await me.get(`/api/agent/v1/companies/${c}/tasks/${'a'.repeat(2048)}`)).statusCode, 404);
  t.equal((await me.get(`/api/agent/v1/companies/${c}/runs?taskId=${'a'.repeat(256)}`)).statusCode, 200);
  t.equal((await me.get('/api/agent/v1/companies?limit=100')).statusCode, 200);
});

t.test('paging while rows are inserted: every pre-existing row exactly once', async (t) => {
  const pager = await agent();
  const before = new Set<string>();
  for (let i = 0; i < 23; i++) before.add((await createCompany(db, pager.tenantId, null, { name: `Co ${i}` })).id);
  // Some rows share one created_at to the microsecond: the cursor must tell them apart.
  await db.query(
    sql.unsafe`insert into companies (tenant_id, name) select ${pager.tenantId}, 'same ' || g from generate_series(1, 5) g`,
  );
  for (const id of await db.anyFirst(
    sql.type(
      z.object({ id: z.string() }),
    )`select id from companies where tenant_id = ${pager.tenantId} and name like 'same %'`,
  ))
    before.add(id);
  const seen: string[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const res = await pager.get(`/api/agent/v1/companies?limit=4${cursor ? `&cursor=${cursor}` : ''}`);
    t.equal(res.statusCode, 200);
    seen.push(...res.json().items.map((i: { id: string }) => i.id));
    cursor = res.json().next_cursor;
    await createCompany(db, pager.tenantId, null, { name: `New ${pages++}` });
  } while (cursor);
  const old = seen.filter((id) => before.has(id));
  t.equal(old.length, before.size, 'all pre-existing rows');
  t.equal(new Set(old).size, old.length, 'none twice');
});

t.test('a run executes on a real worker; the agent reads its output', async (t) => {
  await startTestWorker(t, databaseUrl);
  const path = `/api/agent/v1/companies/${mine.company.id}/runs/${mine.run.id}`;
  const done = await waitFor('the run to succeed', async () => {
    const res = await me.get(path);
    return res.json().status === 'succeeded' ? res.json() : null;
  });
  t.match(done, { status: 'succeeded', model: 'builtin/offline', output: /Write the notes/, finished_at: String });
});

t.test('published description: operationIds, scope, statuses and schema names of the spec', async (t) => {
  const doc = (await app.inject('/openapi.json')).json();
  const expected: Record<string, [string, string]> = {
    '/api/agent/v1/companies': ['listAgentCompanies', 'AgentCompanyListResponse'],
    '/api/agent/v1/companies/{companyRef}': ['getAgentCompany', 'AgentCompanyResponse'],
    '/api/agent/v1/companies/{companyRef}/agents': ['listAgentCompanyAgents', 'AgentCompanyAgentListResponse'],
    '/api/agent/v1/companies/{companyRef}/tasks': ['listAgentCompanyTasks', 'AgentCompanyTaskListResponse'],
    '/api/agent/v1/companies/{companyRef}/tasks/{taskRef}': ['getAgentCompanyTask', 'AgentCompanyTaskResponse'],
    '/api/agent/v1/companies/{companyRef}/runs': ['listAgentCompanyRuns', 'AgentCompanyRunListResponse'],
    '/api/agent/v1/companies/{companyRef}/runs/{runRef}': ['getAgentCompanyRun', 'AgentCompanyRunResponse'],
  };
  for (const [path, [operationId, schema]] of Object.entries(expected)) {
    const op = doc.paths[path]?.get;
    t.equal(op?.operationId, operationId, path);
    t.same(op?.security, [{ AgentBearer: ['svc:companies:read'] }]);
    t.same(Object.keys(op?.responses ?? {}).sort(), ['200', '400', '401', '402', '403', '404', '429', '503']);
    t.match(JSON.stringify(op?.responses['200']), `#/components/schemas/${schema}`);
    t.ok(doc.components.schemas[schema], schema);
  }
  t.notOk(
    Object.keys(doc.paths).some((p) => p.includes('*')),
    'the catch-all is not published',
  );
});
