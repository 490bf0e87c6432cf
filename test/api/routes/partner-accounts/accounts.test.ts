// Connected accounts in use: activation (one active account per service per
// tenant), withPartnerAccessToken refreshing an expired token once under 10
// concurrent callers, a refused refresh → needs_reauth, and removal: tokens
// gone at once, revoked at the provider by the worker (retried after a 503),
// 404 afterwards; another tenant's or person's account id is 404.
import { randomUUID } from 'node:crypto';
import t from 'tap';
import { z } from 'zod';
import { Keyring } from '../../../../core/crypto/keyring.ts';
import { sql } from '../../../../core/db/pool.ts';
import { sealToken } from '../../../../core/partner-accounts/client.ts';
import { withPartnerAccessToken } from '../../../../core/partner-accounts/tokens.ts';
import { signPlatformToken } from '../../../../core/auth/platform-token.ts';
import { createTestDatabase } from '../../../helpers/db.ts';
import { TEST_SECRET } from '../../../helpers/config.ts';
import { waitFor } from '../../../helpers/wait.ts';
import { startTestWorker } from '../../../helpers/worker.ts';
import {
  buildConnectApp,
  CONNECT_CLIENT,
  CONNECT_REDIRECT,
  CONNECT_SECRET,
  connect,
  createMember,
  startPartnerProvider,
} from '../../../helpers/partner-connect.ts';

const op = await startPartnerProvider(t);
const databaseUrl = await createTestDatabase(t);
const api = await buildConnectApp(t, databaseUrl, op);
const { app, db, config } = api;
await startTestWorker(t, databaseUrl, {
  PARTNER_ISSUER: op.issuer,
  PARTNER_CLIENT_ID: CONNECT_CLIENT,
  PARTNER_CLIENT_SECRET: CONNECT_SECRET,
  PARTNER_CONNECT_REDIRECT_URI: CONNECT_REDIRECT,
});
const keyring = Keyring.fromConfig(config);

type Who = { token: string; tenantId: string };
const headers = (m: Who) => ({ authorization: `Bearer ${m.token}`, 'x-tenant-id': m.tenantId });
const list = async (m: Who) => (await app.inject({ url: '/api/partner-accounts/', headers: headers(m) })).json().items;
const activate = (m: Who, id: string, services?: string[]) =>
  app.inject({
    method: 'POST',
    url: `/api/partner-accounts/${id}/activate`,
    headers: headers(m),
    payload: services ? { services } : {},
  });
const remove = (m: Who, id: string) =>
  app.inject({ method: 'DELETE', url: `/api/partner-accounts/${id}`, headers: headers(m) });
const refreshRequests = () =>
  op.requests.filter((r) => r.path === '/token' && r.body.includes('grant_type=refresh_token')).length;
const expire = (id: string) =>
  db.query(sql.unsafe`update partner_accounts set access_expires_at = now() - interval '1 minute' where id = ${id}`);

async function connected(m: Who & { userId: string }, sub: string, services: string[]) {
  const { started } = await connect(api, op, m as never, sub, services);
  return (await app.inject({ url: `/oauth/partner/status?flow=${started.flowId}` })).json().accountId as string;
}

/** A second person in the same tenant. */
async function colleague(m: Who, role: 'admin' | 'viewer') {
  const userId = randomUUID();
  await db.query(sql.unsafe`insert into users (id, email) values (${userId}, ${`${userId}@example.test`})`);
  await db.query(
    sql.unsafe`insert into tenant_memberships (tenant_id, user_id, role) values (${m.tenantId}, ${userId}, ${role})`,
  );
  return {
    userId,
    tenantId: m.tenantId,
    token: await signPlatformToken({ userId }, Buffer.from(TEST_SECRET, 'base64'), config.baseUrl),
  };
}

const member = await createMember(db);
const alice = await connected(member, 'alice-sub', ['calendar', 'mail']);

t.test('activate: one active account per service per tenant (the latest activation takes the service)', async (t) => {
  const res = await activate(member, alice);
  t.equal(res.statusCode, 200, res.body);
  t.match(res.json(), {
    status: 'active',
    services: [
      { id: 'calendar', active: true },
      { id: 'mail', active: true },
    ],
  });
  const bob = await connected(member, 'bob-sub', ['calendar']);
  t.match((await activate(member, bob, ['calendar'])).json(), {
    status: 'active',
    services: [{ id: 'calendar', active: true }],
  });
  const byId = Object.fromEntries((await list(member)).map((a: { id: string }) => [a.id, a]));
  t.match(byId[alice], {
    status: 'active',
    services: [
      { id: 'calendar', active: false },
      { id: 'mail', active: true },
    ],
  });
  t.equal((await activate(member, bob, ['maps'])).statusCode, 400, 'a service the account has no grant for');
  t.match(
    (await activate(member, alice, ['calendar'])).json(),
    { services: [{ id: 'calendar', active: true }] },
    'and back',
  );
  const active = await db.oneFirst(sql.type(z.object({ n: z.number() }))`
    select count(*)::int as n from partner_account_services where tenant_id = ${member.tenantId} and service_id = 'calendar' and active`);
  t.equal(active, 1);
});

t.test('withPartnerAccessToken: an expired token is refreshed once under 10 concurrent callers', async (t) => {
  const fresh = await withPartnerAccessToken(db, config, member.tenantId, 'mail', async (token, account) => ({
    token,
    account,
  }));
  t.equal(fresh.account.accountId, alice);
  const before = refreshRequests();
  await expire(alice);
  const tokens = await Promise.all(
    Array.from({ length: 10 }, () =>
      withPartnerAccessToken(db, config, member.tenantId, 'mail', async (token) => token),
    ),
  );
  t.equal(refreshRequests() - before, 1, 'exactly one refresh request at the provider');
  t.equal(new Set(tokens).size, 1, 'every caller got the new token');
  t.not(tokens[0], fresh.token);
  const userinfo = await fetch(`${op.issuer}/me`, { headers: { authorization: `Bearer ${tokens[0]}` } });
  t.equal(userinfo.status, 200, 'the provider accepts the refreshed token');
  const [listed] = (await list(member)).filter((a: { id: string }) => a.id === alice);
  t.ok(listed.lastUsedAt, 'last-used recorded');
  await t.rejects(
    withPartnerAccessToken(db, config, member.tenantId, 'photos', async () => 1),
    { code: 'partner_account_not_connected' },
  );
});

t.test('a refresh the provider refuses marks the account needs_reauth', async (t) => {
  const other = await createMember(db);
  const id = await connected(other, 'bob-sub', ['tasks']);
  t.equal((await activate(other, id)).statusCode, 200);
  await db.query(
    sql.unsafe`update partner_accounts set refresh_token_sealed = ${sealToken(keyring, id, 'refresh', 'not-a-refresh-token')} where id = ${id}`,
  );
  await expire(id);
  await t.rejects(
    withPartnerAccessToken(db, config, other.tenantId, 'tasks', async () => 'used'),
    { code: 'needs_reauth' },
  );
  t.match((await list(other))[0], { id, status: 'needs_reauth' });
  t.match((await activate(other, id)).json(), { error: 'needs_reauth', status: 409 });
  // Connecting again repairs it.
  await connected(other, 'bob-sub', ['tasks']);
  t.match((await list(other))[0], { id, status: 'active' });
});

t.test("another tenant's or person's account id is 404; a Viewer may not remove", async (t) => {
  const stranger = await createMember(db);
  t.match((await remove(stranger, alice)).json(), { error: 'not_found', status: 404 });
  t.equal((await activate(stranger, alice)).statusCode, 404);
  t.equal(
    (await remove({ token: stranger.token, tenantId: member.tenantId }, alice)).statusCode,
    404,
    'naming the other tenant: not a member',
  );
  const sameTenant = await colleague(member, 'admin');
  t.equal((await remove(sameTenant, alice)).statusCode, 404, "a colleague's account");
  t.same(await list(sameTenant), [], "a colleague does not see the person's accounts");
  t.equal((await remove(await colleague(member, 'viewer'), alice)).statusCode, 403);
  t.equal((await list(member)).length, 2, 'nothing removed');
});

t.test('delete: tokens gone at once, revoked at the provider (retried after a 503), 404 afterwards', async (t) => {
  const sealed = await db.one(sql.type(z.object({ access_token_sealed: z.string(), refresh_token_sealed: z.string() }))`
    select access_token_sealed, refresh_token_sealed from partner_accounts where id = ${alice}`);
  const { openToken } = await import('../../../../core/partner-accounts/client.ts');
  const refreshToken = openToken(keyring, alice, 'refresh', sealed.refresh_token_sealed);
  const accessToken = openToken(keyring, alice, 'access', sealed.access_token_sealed);
  op.failNext('/token/revocation', 503, 1);
  const revocationsBefore = op.requests.filter((r) => r.path === '/token/revocation').length;
  const res = await remove(member, alice);
  t.equal(res.statusCode, 200, res.body);
  t.same(res.json(), { deleted: true, revocation: 'queued' });
  t.notOk(
    (await list(member)).some((a: { id: string }) => a.id === alice),
    'gone from the list at once',
  );
  const row = await db.one(sql.type(
    z.object({ state: z.string(), a: z.string().nullable(), r: z.string().nullable() }),
  )`
    select state, access_token_sealed as a, refresh_token_sealed as r from partner_accounts where id = ${alice}`);
  t.same(row, { state: 'revoked', a: null, r: null }, 'no token left on the account');
  await t.rejects(
    withPartnerAccessToken(db, config, member.tenantId, 'mail', async () => 1),
    { code: 'partner_account_not_connected' },
  );

  await waitFor(
    'the revocation job to finish',
    async () =>
      (await db.maybeOne(sql.unsafe`select 1 from partner_token_revocations where account_id = ${alice}`)) === null,
  );
  const revocations = op.requests.filter((r) => r.path === '/token/revocation').slice(revocationsBefore);
  t.ok(revocations.length >= 3, `the first answer was 503, then both tokens (${revocations.length} requests)`);
  t.ok(
    revocations.some((r) => r.body.includes(encodeURIComponent(refreshToken)) || r.body.includes(refreshToken)),
    'the refresh token was revoked',
  );
  t.ok(
    revocations.some((r) => r.body.includes(accessToken)),
    'the access token was revoked',
  );
  const userinfo = await fetch(`${op.issuer}/me`, { headers: { authorization: `Bearer ${accessToken}` } });
  t.equal(userinfo.status, 401, 'the provider no longer accepts the access token');
  t.equal((await remove(member, alice)).statusCode, 404);
  t.equal((await activate(member, alice)).statusCode, 404);
});

t.test('a person who deletes their own account: the provider still gets the revocation', async (t) => {
  const leaving = await createMember(db);
  const accountId = await connected(leaving, 'bob-sub', ['calendar']);
  const before = op.requests.filter((r) => r.path === '/token/revocation').length;
  const res = await app.inject({
    method: 'DELETE',
    url: '/api/auth/account',
    headers: { authorization: `Bearer ${leaving.token}` },
  });
  t.equal(res.statusCode, 200, res.body);
  t.notOk(
    await db.exists(sql.unsafe`select 1 from partner_accounts where id = ${accountId}`),
    'the account went with the person',
  );
  await waitFor(
    'the revocation job to finish',
    async () =>
      (await db.maybeOne(sql.unsafe`select 1 from partner_token_revocations where account_id = ${accountId}`)) === null,
  );
  t.ok(
    op.requests.filter((r) => r.path === '/token/revocation').length >= before + 2,
    'refresh and access token revoked',
  );
});
