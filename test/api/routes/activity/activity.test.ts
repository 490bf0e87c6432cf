// Activity: every list returns only the tenant's rows, pages stably while
// rows are inserted, filters (bad ones 400), Viewer reads, another tenant's
// session is 404; session entries interleave messages and job events.
import t from 'tap';
import { z } from 'zod';
import { sql } from '../../../../core/db/pool.ts';
import { buildTestApp } from '../../../helpers/app.ts';
import { createTestDatabase } from '../../../helpers/db.ts';
import { sendBatch } from '../../../../core/chat/send.ts';
import { createMember, enqueue } from '../../../helpers/fixtures.ts';

const databaseUrl = await createTestDatabase(t);
const { app, db } = await buildTestApp(t, databaseUrl);
const owner = await createMember(db, 'admin');
const viewer = await createMember(db, 'viewer');
await db.query(
  sql.unsafe`insert into tenant_memberships (tenant_id, user_id, role) values (${owner.tenantId}, ${viewer.userId}, 'viewer')`,
);
const other = await createMember(db, 'admin');
const asViewer = { authorization: `Bearer ${viewer.token}`, 'x-tenant-id': owner.tenantId };
const asOther = { authorization: `Bearer ${other.token}`, 'x-tenant-id': other.tenantId };
const get = (url: string, headers: Record<string, string> = asViewer) => app.inject({ url, headers });

const Id = sql.type(z.object({ id: z.string() }));
const agent = (tenantId: string, name: string, isDefault = false) =>
  db.oneFirst(
    Id`insert into agents (tenant_id, name, model, is_default) values (${tenantId}, ${name}, 'builtin/offline', ${isDefault}) returning id`,
  );
const session = (tenantId: string, agentId: string, title: string) =>
  db.oneFirst(
    Id`insert into chat_sessions (tenant_id, agent_id, title) values (${tenantId}, ${agentId}, ${title}) returning id`,
  );
const message = (tenantId: string, sessionId: string, role: string, content: string, attachments: object[] = []) =>
  db.oneFirst(
    Id`insert into chat_messages (tenant_id, session_id, role, content, attachments) values (${tenantId}, ${sessionId}, ${role}, ${content}, ${sql.jsonb(attachments as never)}) returning id`,
  );
const setJob = (id: string, fields: ReturnType<typeof sql.fragment>) =>
  db.query(sql.unsafe`update jobs set ${fields} where id = ${id}`);

const a1 = await agent(owner.tenantId, 'Assistant', true);
const a2 = await agent(owner.tenantId, 'Researcher');
const b1 = await agent(other.tenantId, 'Theirs', true);
const sessions: string[] = [];
for (let i = 0; i < 5; i++) sessions.push(await session(owner.tenantId, i < 3 ? a1 : a2, `S${i}`));
const theirSession = await session(other.tenantId, b1, 'Theirs');
await message(other.tenantId, theirSession, 'user', 'their message', [
  { name: 'their.txt', mediaType: 'text/plain', text: 'x' },
]);

// Session 0: a full turn. Session 1: a running job. Session 2: a failed one.
const s0 = sessions[0]!;
await message(owner.tenantId, s0, 'user', 'Hello', [{ name: 'notes.txt', mediaType: 'text/plain', text: 'abc' }]);
const turn = await enqueue(db, { kind: 'chat.turn', tenantId: owner.tenantId, sessionId: s0 });
await setJob(turn, sql.fragment`status = 'running', started_at = now(), attempts = 1`);
await setJob(turn, sql.fragment`progress = '{"text":"Hi"}'::jsonb`);
await setJob(turn, sql.fragment`progress = '{"text":"Hi there"}'::jsonb`);
await db.transaction(async (tx) => {
  await tx.query(
    sql.unsafe`insert into chat_messages (tenant_id, session_id, role, content, job_id) values (${owner.tenantId}, ${s0}, 'assistant', 'Hi there', ${turn})`,
  );
  await tx.query(
    sql.unsafe`update jobs set status = 'succeeded', finished_at = now(), result = '{}' where id = ${turn}`,
  );
});
const delivery = await enqueue(db, { kind: 'channel.deliver', tenantId: owner.tenantId, sessionId: s0 });
await setJob(
  await enqueue(db, { kind: 'chat.turn', tenantId: owner.tenantId, sessionId: sessions[1]! }),
  sql.fragment`status = 'running', started_at = now()`,
);
await setJob(
  await enqueue(db, { kind: 'chat.turn', tenantId: owner.tenantId, sessionId: sessions[2]! }),
  sql.fragment`status = 'failed', finished_at = now(), error = '{"code":"x","message":"y"}'`,
);

async function all(url: string, limit: number, between?: () => Promise<unknown>) {
  const seen: { id?: string; tool?: string; name?: string }[] = [];
  let cursor: string | null = null;
  do {
    const res = await get(`${url}${url.includes('?') ? '&' : '?'}limit=${limit}${cursor ? `&cursor=${cursor}` : ''}`);
    if (res.statusCode !== 200) throw new Error(res.body);
    seen.push(...res.json().items);
    cursor = res.json().nextCursor;
    await between?.();
  } while (cursor);
  return seen;
}

t.test('sessions: tenant only, stable paging during inserts, filters', async (t) => {
  let added = 0;
  const paged = await all('/api/activity/sessions', 2, async () => {
    if (added++ < 2) await session(owner.tenantId, a1, 'Inserted while paging');
  });
  const ids = paged.map((s) => s.id);
  t.same(ids, [...sessions].reverse(), 'newest first, each once, new rows never shift a page');
  t.same((await all('/api/activity/sessions', 100, undefined)).length, 7);
  t.same(
    (await get('/api/activity/sessions', asOther)).json().items.map((s: { id: string }) => s.id),
    [theirSession],
  );

  const byAgent = (await get(`/api/activity/sessions?agentId=${a2}`)).json().items.map((s: { id: string }) => s.id);
  t.same(byAgent, [sessions[4], sessions[3]]);
  // Session 0's latest job is the delivery, still queued.
  t.same(
    (await get('/api/activity/sessions?status=active')).json().items.map((s: { id: string }) => s.id),
    [sessions[1], sessions[0]],
  );
  t.same(
    (await get('/api/activity/sessions?status=failed')).json().items.map((s: { id: string }) => s.id),
    [sessions[2]],
  );
  t.equal((await get('/api/activity/sessions?status=idle')).json().items.length, 4);
  t.equal(
    (await get(`/api/activity/sessions?from=${new Date(Date.now() + 60_000).toISOString()}`)).json().items.length,
    0,
  );
  t.equal(
    (await get(`/api/activity/sessions?to=${new Date(Date.now() + 60_000).toISOString()}`)).json().items.length,
    7,
  );
  for (const bad of [
    'status=sleeping',
    'agentId=nope',
    'from=yesterday',
    'limit=0',
    'limit=101',
    'cursor=garbage',
    `from=${new Date().toISOString()}&to=2000-01-01T00:00:00Z`,
  ]) {
    const res = await get(`/api/activity/sessions?${bad}`);
    t.equal(res.statusCode, 400, bad);
    t.equal(res.json().status, 400);
  }
  t.equal(
    (
      await app.inject({
        url: '/api/activity/sessions',
        headers: { authorization: asViewer.authorization, 'x-tenant-id': other.tenantId },
      })
    ).statusCode,
    404,
    'not a member',
  );
});

t.test("session entries: messages and job events in order; another tenant's session is 404", async (t) => {
  const res = await get(`/api/activity/sessions/${s0}/entries`);
  t.equal(res.statusCode, 200);
  const entries = res.json().items as {
    type: string;
    message?: { content: string };
    job?: { kind: string; event: string; progress: unknown };
  }[];
  t.same(
    entries.map((e) => (e.type === 'message' ? `message:${e.message!.content}` : `${e.job!.kind}:${e.job!.event}`)),
    [
      'message:Hello',
      'chat.turn:queued',
      'chat.turn:started',
      'chat.turn:progress',
      'message:Hi there',
      'chat.turn:succeeded',
      'channel.deliver:queued',
    ],
  );
  t.same(entries[3]!.job!.progress, { text: 'Hi there' }, 'one progress entry, with the latest text');
  const paged = await all(`/api/activity/sessions/${s0}/entries`, 2, async () => {
    await setJob(delivery, sql.fragment`status = 'running', started_at = now()`).catch(() => undefined);
  });
  t.equal(paged.length, 8, 'the delivery that started while paging is appended, nothing repeated');
  t.equal((await get(`/api/activity/sessions/${theirSession}/entries`)).statusCode, 404);
  t.equal((await get(`/api/activity/sessions/${s0}/entries`, asOther)).statusCode, 404);
  t.equal((await get('/api/activity/sessions/not-a-uuid/entries')).statusCode, 400);
});

t.test("agents, teams, files, skills, tools, cron jobs: the tenant's own only", async (t) => {
  const agents = (await get('/api/activity/agents')).json().items;
  t.same(
    agents.map((a: { name: string }) => a.name),
    ['Researcher', 'Assistant'],
  );
  t.match(agents[1], { id: a1, sessions: 5, messages: 2, jobs: 4, lastActivityAt: String });
  t.same(
    (await get('/api/activity/agents', asOther)).json().items.map((a: { id: string }) => a.id),
    [b1],
  );

  const company = await db.oneFirst(
    Id`insert into companies (tenant_id, name) values (${owner.tenantId}, 'Acme') returning id`,
  );
  await db.query(
    sql.unsafe`insert into company_agents (tenant_id, company_id, name, role) values (${owner.tenantId}, ${company}, 'CEO', 'Leads'), (${owner.tenantId}, ${company}, 'CTO', 'Builds')`,
  );
  // Both agents were inserted by one statement (one created_at): their order is by id, so compare as a set.
  const teams = (await get('/api/activity/teams')).json().items;
  t.match(teams, [{ id: company, name: 'Acme', agentCount: 2 }]);
  t.same(teams[0].agents.map((a: { name: string }) => a.name).sort(), ['CEO', 'CTO']);
  t.same((await get('/api/activity/teams', asOther)).json().items, []);

  await app.inject({
    method: 'POST',
    url: '/api/memory/content',
    headers: { authorization: `Bearer ${owner.token}` },
    payload: { filename: 'facts.md', content: 'x' },
  });
  const files = (await get('/api/activity/files')).json().items;
  t.same(
    files.map((f: { source: string; name: string }) => `${f.source}:${f.name}`),
    ['memory:facts.md', 'attachment:notes.txt'],
  );
  t.match(files[1], { sessionId: s0, bytes: 3, mediaType: 'text/plain' });
  t.same(
    (await get('/api/activity/files?source=attachment')).json().items.map((f: { name: string }) => f.name),
    ['notes.txt'],
  );
  t.same(
    (await all('/api/activity/files', 1)).map((f) => f.name),
    ['facts.md', 'notes.txt'],
  );
  t.same(
    (await get('/api/activity/files', asOther)).json().items.map((f: { name: string }) => f.name),
    ['their.txt'],
  );
  t.equal((await get('/api/activity/files?source=disk')).statusCode, 400);

  await db.query(sql.unsafe`
    insert into skills (tenant_id, name, description, instructions, manifest, manifest_sha256, tree_sha256, files, total_bytes, allowed_tools, env_schema, published)
    values (${owner.tenantId}, 'pdf', 'Reads PDFs', 'Use it.', '{}', 'a', 'b', '[]', 0, '{Read}', '[{"name":"TOKEN","type":"string","required":true,"secret":true,"description":""}]', true)`);
  t.match((await get('/api/activity/skills')).json().items, [
    { name: 'pdf', published: true, uses: 0, configuration: { configured: false, missing: ['TOKEN'] } },
  ]);
  t.same((await get('/api/activity/skills', asOther)).json().items, []);

  const tools = await all('/api/activity/tools', 7);
  const names = tools.map((x) => x.tool);
  t.ok(
    names.includes('agent:listAgentCompanies') && names.includes('skill:pdf') && names.includes('skill-tool:Read'),
    'operations, skills and their tools',
  );
  t.equal(new Set(names).size, names.length, 'paged without repeats');
  t.notOk((await all('/api/activity/tools', 100)).some((x) => x.tool === 'skill:pdf') === false);
  t.notOk(
    (await get('/api/activity/tools', asOther)).json().items.some((x: { tool: string }) => x.tool === 'skill:pdf'),
    "not another tenant's skill",
  );

  await db.query(
    sql.unsafe`insert into scheduled_job_runs (identifier, task, status, finished_at, detail) values ('memory_retention', 'memory.retention', 'succeeded', now(), '{"deleted": 3}')`,
  );
  await db.query(
    sql.unsafe`insert into external_cron_runs (tenant_id, name, status, started_at, detail) values (${owner.tenantId}, 'nightly-report', 'succeeded', now(), '{"rows": 1}'), (${other.tenantId}, 'their-job', 'failed', now(), '{}')`,
  );
  const runs = (await get('/api/activity/cron-jobs')).json().items;
  t.same(runs.map((r: { source: string; name: string }) => `${r.source}:${r.name}`).sort(), [
    'platform:memory_retention',
    'tenant:nightly-report',
  ]);
  t.equal(
    runs.find((r: { source: string }) => r.source === 'platform').detail,
    null,
    "the platform's detail is not shown",
  );
  t.same(
    (await get('/api/activity/cron-jobs?source=tenant', asOther)).json().items.map((r: { name: string }) => r.name),
    ['their-job'],
  );
  t.same((await get('/api/activity/cron-jobs?status=failed')).json().items, []);
  t.equal((await all('/api/activity/cron-jobs', 1)).length, 2);
});

t.test(
  'session entries: sends of one batch (one instant) page one at a time, each message and queued turn once, in order',
  async (t) => {
    const batchSession = await session(owner.tenantId, a1, 'Batch');
    const outcomes = await sendBatch(
      db as never,
      [1, 2, 3].map((n) => ({
        tenantId: owner.tenantId,
        userId: owner.userId,
        idempotencyKey: `activity-batch-${n}`,
        sessionId: batchSession,
        message: `m${n}`,
        attachments: [],
      })),
      false,
    );
    const jobIds = outcomes.map((o) => (o.value as { body: { jobId: string } }).body.jobId);
    const entries: { type: string; message?: { content: string }; job?: { jobId: string; event: string } }[] = [];
    let cursor: string | null = null;
    do {
      const res = await get(
        `/api/activity/sessions/${batchSession}/entries?limit=1${cursor ? `&cursor=${cursor}` : ''}`,
      );
      t.equal(res.statusCode, 200);
      entries.push(...res.json().items);
      cursor = res.json().nextCursor;
    } while (cursor);
    t.same(
      entries
        .filter((e) => e.type === 'message')
        .map((e) => e.message!.content)
        .sort(),
      ['m1', 'm2', 'm3'],
      'each message once',
    );
    t.same(
      entries.slice(0, 3).map((e) => e.type),
      ['message', 'message', 'message'],
      'the messages of an instant before its queued jobs',
    );
    t.same(
      entries.slice(3).map((e) => `${e.job!.event}`),
      ['queued', 'queued', 'queued'],
    );
    t.same(
      entries.slice(3).map((e) => e.job!.jobId),
      [...jobIds].sort(),
      'each queued turn once, by id within the instant',
    );
  },
);
