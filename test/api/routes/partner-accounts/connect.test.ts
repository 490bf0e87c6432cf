// The connect flow against oidc-provider on loopback: start → authorize →
// callback → status completed → the account listed with the chosen services'
// scopes; a second start adding services keeps the first scopes; denied
// consent, forged, replayed and other-browser states fail with nothing
// stored; tokens are sealed at rest and never logged.
import t from 'tap';
import { z } from 'zod';
import { sql } from '../../../../core/db/pool.ts';
import { createTestDatabase, rowCount } from '../../../helpers/db.ts';
import { buildTestApp } from '../../../helpers/app.ts';
import {
  authorizeAt,
  buildConnectApp,
  callback,
  connect,
  createMember,
  startConnect,
  startPartnerProvider,
} from '../../../helpers/partner-connect.ts';

const op = await startPartnerProvider(t);
const databaseUrl = await createTestDatabase(t);
const api = await buildConnectApp(t, databaseUrl, op);
const { app, db } = api;

const count = (table: string) => rowCount(db, table);
const status = async (flowId: string) => (await app.inject({ url: `/oauth/partner/status?flow=${flowId}` })).json();
const list = async (member: { token: string; tenantId: string }) =>
  (
    await app.inject({
      url: '/api/partner-accounts/',
      headers: { authorization: `Bearer ${member.token}`, 'x-tenant-id': member.tenantId },
    })
  ).json();

t.test('the catalog: 25 services in four categories, each with scopes', async (t) => {
  const res = await app.inject({ url: '/oauth/partner/services' });
  t.equal(res.statusCode, 200);
  const body = res.json();
  t.equal(body.count, 25);
  t.same(
    body.categories.map((c: { category: string }) => c.category),
    ['Core', 'Communication', 'Location', 'Specialized'],
  );
  const services = body.categories.flatMap((c: { services: unknown[] }) => c.services);
  t.equal(services.length, 25);
  t.ok(services.every((s: { scopes: string[] }) => s.scopes.length > 0 && s.scopes.every((x) => x.startsWith('svc.'))));
});

t.test('start needs a platform token (401) and the configuration (503 naming it)', async (t) => {
  const anonymous = await app.inject({ method: 'POST', url: '/oauth/partner/start', payload: {} });
  t.equal(anonymous.statusCode, 401);
  t.equal((await app.inject({ url: '/oauth/partner/start' })).statusCode, 401);
  const bare = await buildTestApp(t, databaseUrl);
  const member = await createMember(db);
  const res = await bare.app.inject({
    method: 'POST',
    url: '/oauth/partner/start',
    headers: { authorization: `Bearer ${member.token}` },
    payload: {},
  });
  t.equal(res.statusCode, 503);
  t.match(res.json(), {
    error: 'auth_method_disabled',
    message: /PARTNER_ISSUER.*PARTNER_CLIENT_ID.*PARTNER_CLIENT_SECRET/,
  });
});

t.test('GET start redirects to the provider with state, PKCE and the chosen scopes', async (t) => {
  const member = await createMember(db);
  const res = await app.inject({
    url: '/oauth/partner/start?services=calendar,maps',
    headers: { authorization: `Bearer ${member.token}` },
  });
  t.equal(res.statusCode, 302);
  const location = new URL(String(res.headers.location));
  t.equal(location.origin, op.issuer);
  t.equal(location.searchParams.get('code_challenge_method'), 'S256');
  t.ok(location.searchParams.get('state'));
  t.same(location.searchParams.get('scope')!.split(' ').sort(), [
    'email',
    'offline_access',
    'openid',
    'svc.calendar.read',
    'svc.calendar.write',
    'svc.maps.read',
  ]);
  t.match(String(res.headers['set-cookie']), /partner_connect=.*HttpOnly/);
  const unknown = await app.inject({
    url: '/oauth/partner/start?services=calendar,nope',
    headers: { authorization: `Bearer ${member.token}` },
  });
  t.equal(unknown.statusCode, 400);
});

t.test('connect: completed, listed with the scopes; a second grant adds services and keeps the first', async (t) => {
  const member = await createMember(db);
  const first = await connect(api, op, member, 'alice-sub', ['calendar']);
  t.equal(first.res.statusCode, 200, 'the page says done');
  t.match(first.res.headers['content-type'], /text\/html/);
  t.match(first.res.body, /connected/i);
  const done = await status(first.started.flowId);
  t.match(done, { status: 'completed', reason: null, services: ['calendar'] });
  const [account] = (await list(member)).items;
  t.match(account, {
    id: done.accountId,
    email: 'alice@example.com',
    status: 'inactive',
    services: [{ id: 'calendar', scopes: ['svc.calendar.read', 'svc.calendar.write'], active: false }],
  });

  const second = await connect(api, op, member, 'alice-sub', ['mail']);
  t.equal(second.res.statusCode, 200);
  t.match(second.started.scope, /svc\.calendar\.read/, 'the new request asks for the scopes already granted');
  const items = (await list(member)).items;
  t.equal(items.length, 1, 'the same partner account');
  t.same(
    items[0].services.map((s: { id: string }) => s.id),
    ['calendar', 'mail'],
  );
  t.ok(
    ['svc.calendar.read', 'svc.calendar.write', 'svc.mail.read', 'svc.mail.write'].every((s) =>
      items[0].scopes.includes(s),
    ),
    'first scopes kept',
  );
  t.equal((await status(second.started.flowId)).accountId, account.id);
});

t.test('denied consent: failed (access_denied), nothing stored', async (t) => {
  const member = await createMember(db);
  const before = await count('partner_accounts');
  const started = await startConnect(api, member, ['drive']);
  t.match(await status(started.flowId), { status: 'pending' });
  const res = await callback(api, await authorizeAt(op, started, { deny: true }), started.cookie);
  t.equal(res.statusCode, 400);
  t.match(res.body, /not granted/);
  t.match(await status(started.flowId), { status: 'failed', reason: 'access_denied' });
  t.equal(await count('partner_accounts'), before);
  t.same((await list(member)).items, []);
});

t.test('forged, replayed and other-browser states: 400 invalid_state, nothing stored', async (t) => {
  const member = await createMember(db);
  const forged = await callback(api, '/oauth/partner/callback?state=forged-state&code=abc', '', 'application/json');
  t.equal(forged.statusCode, 400);
  t.match(forged.json(), { error: 'invalid_state', status: 400 });

  const { started, res, path } = await connect(api, op, member, 'bob-sub', ['contacts']);
  t.equal(res.statusCode, 200);
  const accounts = await count('partner_accounts');
  const services = await count('partner_account_services');
  // The same callback again (a replay): the flow is spent.
  const replay = await callback(api, path, started.cookie, 'application/json');
  t.equal(replay.statusCode, 400);
  t.match(replay.json(), { error: 'invalid_state' });
  t.match(await status(started.flowId), { status: 'completed' }, 'the first outcome stands');

  // A state carried to another browser (without the flow's cookie) spends the flow.
  const other = await startConnect(api, member, ['tasks']);
  const otherPath = await authorizeAt(op, other, { accountId: 'bob-sub' });
  const stolen = await callback(api, otherPath, `partner_connect=${'x'.repeat(43)}`);
  t.equal(stolen.statusCode, 400);
  t.match(stolen.body, /another browser/);
  t.match(await status(other.flowId), { status: 'failed', reason: 'other_browser' });
  t.equal(
    (await callback(api, otherPath, other.cookie)).statusCode,
    400,
    'spent: the right browser cannot use it afterwards',
  );
  t.equal(await count('partner_accounts'), accounts);
  t.equal(await count('partner_account_services'), services);
  t.equal(
    (await app.inject({ url: '/oauth/partner/status?flow=00000000-0000-4000-8000-000000000000' })).statusCode,
    404,
  );
});

t.test('tokens are sealed at rest and never logged; the API never returns them', async (t) => {
  const member = await createMember(db);
  const { started } = await connect(api, op, member, 'alice-sub', ['notes']);
  const tokenCalls = op.requests.filter((r) => r.path === '/token');
  t.ok(tokenCalls.length > 0);
  const row = await db.one(sql.type(
    z.object({ id: z.string(), access_token_sealed: z.string(), refresh_token_sealed: z.string().nullable() }),
  )`
    select a.id, a.access_token_sealed, a.refresh_token_sealed from partner_accounts a join partner_connect_flows f on f.account_id = a.id where f.id = ${started.flowId}`);
  t.ok(row.refresh_token_sealed, 'a refresh token was granted (offline_access)');
  // The raw tokens as the provider issued them: read back through our own opening code.
  const { Keyring } = await import('../../../../core/crypto/keyring.ts');
  const { openToken } = await import('../../../../core/partner-accounts/client.ts');
  const keyring = Keyring.fromConfig(api.config);
  const access = openToken(keyring, row.id, 'access', row.access_token_sealed);
  const refresh = openToken(keyring, row.id, 'refresh', row.refresh_token_sealed!);
  t.ok(access.length > 20 && refresh.length > 20);
  const dump = await db.oneFirst(sql.type(z.object({ d: z.string() }))`
    select (select coalesce(string_agg(t::text, ' '), '') from partner_accounts t) || (select coalesce(string_agg(f::text, ' '), '') from partner_connect_flows f) as d`);
  t.notOk(dump.includes(access) || dump.includes(refresh), 'no raw token in the tables');
  t.throws(
    () => openToken(keyring, '00000000-0000-4000-8000-000000000000', 'access', row.access_token_sealed),
    'bound to its account row',
  );
  const logs = api.logs();
  t.ok(logs.includes('partner account connected'), 'the app did log (debug level)');
  t.notOk(logs.includes(access) || logs.includes(refresh), 'no token in the log');
  const listed = JSON.stringify(await list(member)) + JSON.stringify(await status(started.flowId));
  t.notOk(listed.includes(access) || listed.includes(refresh), 'no token in the answers');
});
