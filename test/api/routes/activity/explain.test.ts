// The activity queries on a tenant with 100k messages use their indexes (no
// sequential scan of messages or jobs). Plans are checked, never timings.
import t from 'tap';
import { z } from 'zod';
import { sql } from '../../../../core/db/pool.ts';
import { buildTestApp } from '../../../helpers/app.ts';
import { createTestDatabase } from '../../../helpers/db.ts';
import { createMember } from '../../../helpers/fixtures.ts';

const databaseUrl = await createTestDatabase(t);
const { app, db } = await buildTestApp(t, databaseUrl);
const m = await createMember(db, 'admin');
const headers = { authorization: `Bearer ${m.token}`, 'x-tenant-id': m.tenantId };

// 200 sessions, 100k messages (every 50th with an attachment), one job per 10 messages.
await db.query(
  sql.unsafe`insert into agents (tenant_id, name, model, is_default) values (${m.tenantId}, 'A', 'builtin/offline', true)`,
);
await db.query(sql.unsafe`
  insert into chat_sessions (tenant_id, title, agent_id, created_at)
  select ${m.tenantId}, 'S' || g, (select id from agents where tenant_id = ${m.tenantId}), now() - make_interval(mins => g) from generate_series(1, 200) g`);
const sessionIds = sql.array(
  await db.anyFirst(
    sql.type(z.object({ id: z.string() }))`select id from chat_sessions where tenant_id = ${m.tenantId} order by id`,
  ),
  'uuid',
);
await db.query(sql.unsafe`
  insert into chat_messages (tenant_id, session_id, role, content, attachments, created_at)
  select ${m.tenantId}, s.id, 'assistant', 'message ' || g,
    case when g % 50 = 0 then '[{"name":"a.txt","mediaType":"text/plain","text":"x"}]'::jsonb else '[]'::jsonb end,
    now() - make_interval(secs => g)
  from generate_series(1, 100000) g,
    lateral (select (${sessionIds}::uuid[])[1 + g % 200] as id) s`);
await db.query(sql.unsafe`
  insert into jobs (id, tenant_id, kind, session_id, status, created_at)
  select gen_random_uuid(), ${m.tenantId}, 'chat.turn', (${sessionIds}::uuid[])[1 + g % 200], 'succeeded', now() - make_interval(secs => g)
  from generate_series(1, 10000) g`);
for (const table of ['chat_messages', 'jobs', 'chat_sessions', 'session_job_events'])
  await db.query(sql.unsafe`analyze ${sql.identifier([table])}`);
const sessionId = await db.oneFirst(
  sql.type(
    z.object({ id: z.string() }),
  )`select session_id as id from chat_messages where tenant_id = ${m.tenantId} group by session_id order by count(*) desc limit 1`,
);

const plan = async (query: ReturnType<typeof sql.unsafe>) =>
  (await db.any(query)).map((r) => String((r as Record<string, unknown>)['QUERY PLAN'])).join('\n');

t.test('the lists answer on a 100k-message tenant', async (t) => {
  for (const url of [
    '/api/activity/sessions?limit=100',
    `/api/activity/sessions/${sessionId}/entries?limit=100`,
    '/api/activity/files?limit=100',
    '/api/activity/agents',
    '/api/activity/sessions?status=idle&limit=20',
  ]) {
    const res = await app.inject({ url, headers });
    t.equal(res.statusCode, 200, url);
  }
});

t.test('plans use the indexes', async (t) => {
  const entries = await plan(sql.unsafe`
    explain select id from chat_messages where session_id = ${sessionId} and tenant_id = ${m.tenantId} and (created_at, id) > (now() - interval '1 day', '00000000-0000-0000-0000-000000000000'::uuid)
    order by created_at, id limit 101`);
  t.match(entries, /Index Scan using chat_messages_session_time_idx/, entries);
  const attachments = await plan(sql.unsafe`
    explain select id from chat_messages m where m.tenant_id = ${m.tenantId} and m.attachments <> '[]'::jsonb order by m.created_at desc, m.id desc limit 102`);
  t.match(attachments, /chat_messages_attachments_idx/, attachments);
  const latestJob = await plan(
    sql.unsafe`explain select status from jobs where session_id = ${sessionId} order by created_at desc limit 1`,
  );
  t.match(latestJob, /jobs_session_idx/, latestJob);
  t.notMatch(entries + attachments + latestJob, /Seq Scan/);
});
