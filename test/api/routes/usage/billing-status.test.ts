// GET /api/billing/status: user messages of this UTC month only, against the
// plan's limit (the chat send tests check the quota itself).
// (Lives beside the usage tests: the billing area has no test folder of its own yet.)
import { randomUUID } from 'node:crypto';
import t from 'tap';
import { signPlatformToken } from '../../../../core/auth/platform-token.ts';
import { sql } from '../../../../core/db/pool.ts';
import { buildTestApp } from '../../../helpers/app.ts';
import { TEST_SECRET } from '../../../helpers/config.ts';
import { createTestDatabase } from '../../../helpers/db.ts';
import { createMember, type Member } from '../../../helpers/fixtures.ts';

const databaseUrl = await createTestDatabase(t);
const { app, db } = await buildTestApp(t, databaseUrl);
const admin = await createMember(db, 'admin');
const other = await createMember(db, 'admin');

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
const status = (m: Member, tenantId = m.tenantId) =>
  app.inject({ url: '/api/billing/status', headers: { authorization: `Bearer ${m.token}`, 'x-tenant-id': tenantId } });

/** `count` messages of `role` in a new session, created at the given SQL time expression. */
async function messages(tenantId: string, role: 'user' | 'assistant', count: number, at: 'now' | 'last month') {
  const session = randomUUID();
  await db.query(sql.unsafe`insert into chat_sessions (id, tenant_id) values (${session}, ${tenantId})`);
  const when =
    at === 'now'
      ? sql.fragment`now()`
      : sql.fragment`(date_trunc('month', now() at time zone 'UTC') at time zone 'UTC') - interval '1 hour'`;
  await db.query(sql.unsafe`
    insert into chat_messages (tenant_id, session_id, role, content, created_at)
    select ${tenantId}, ${session}, ${role}, 'message ' || g, ${when} from generate_series(1, ${count}) g`);
}

t.test('counts the user messages of this month and shows the plan limits', async (t) => {
  const empty = await status(viewer);
  t.equal(empty.statusCode, 200, 'a Viewer may read it');
  t.match(empty.json(), {
    plan: 'free',
    source: null,
    messageCount: 0,
    remainingMessages: 200,
    limits: { monthlyMessages: 200, models: ['builtin/offline'], companyWork: false },
    credits: { balanceMicros: 0 },
  });
  t.match(empty.json().period.start, /^\d{4}-\d{2}-01$/);
  t.equal(
    empty.json().billingMode,
    'sandbox',
    'without Stripe settings billing runs in the sandbox, and the status says so',
  );

  await messages(admin.tenantId, 'user', 3, 'now');
  await messages(admin.tenantId, 'assistant', 3, 'now');
  await messages(admin.tenantId, 'user', 5, 'last month');
  await messages(other.tenantId, 'user', 7, 'now');
  await db.query(
    sql.unsafe`insert into tenant_credits (tenant_id, balance_micros) values (${admin.tenantId}, 1234567)`,
  );
  t.match((await status(admin)).json(), {
    messageCount: 3,
    remainingMessages: 197,
    credits: { balanceMicros: 1234567 },
  });
  t.match((await status(other)).json(), { messageCount: 7 });

  await db.query(sql.unsafe`update tenants set plan = 'pro' where id = ${admin.tenantId}`);
  t.match((await status(admin)).json(), {
    plan: 'pro',
    limits: { monthlyMessages: 10_000, companyWork: true },
    remainingMessages: 9_997,
  });
  await db.query(sql.unsafe`update tenants set plan = 'free' where id = ${admin.tenantId}`);
});

t.test('a used-up month shows no messages remaining', async (t) => {
  await messages(admin.tenantId, 'user', 197, 'now');
  t.match((await status(admin)).json(), { messageCount: 200, remainingMessages: 0 });
});

t.test('tenant rules: header required, members only', async (t) => {
  t.equal((await app.inject({ url: '/api/billing/status' })).statusCode, 401);
  const missing = await app.inject({ url: '/api/billing/status', headers: { authorization: `Bearer ${admin.token}` } });
  t.match(missing.json(), { error: 'invalid_request', status: 400 });
  t.match((await status(admin, 'not-a-uuid')).json(), { status: 400 });
  t.match((await status(admin, other.tenantId)).json(), { error: 'not_found', status: 404 });
});
