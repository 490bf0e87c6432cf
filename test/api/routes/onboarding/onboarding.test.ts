// Onboarding: the first workspace (idempotent, once per user even when
// called concurrently), the model list, provider setup that checks the key
// with a real local OpenAI-protocol server before anything is saved, and
// completion with Dashboard Auth.
import { randomUUID } from 'node:crypto';
import t from 'tap';
import { z } from 'zod';
import { signDashboardToken } from '../../../../core/auth/dashboard-token.ts';
import { signPlatformToken } from '../../../../core/auth/platform-token.ts';
import { createLicense } from '../../../../core/dashboard/licenses.ts';
import { sql } from '../../../../core/db/pool.ts';
import { TEST_SECRET } from '../../../helpers/config.ts';
import { buildTestApp } from '../../../helpers/app.ts';
import { createTestDatabase } from '../../../helpers/db.ts';
import { startFakeOpenAI } from '../../../helpers/fake-providers.ts';
import { createMember } from '../../../helpers/fixtures.ts';

const RIGHT_KEY = 'sk-test-RIGHTKEY-9a8b';
const fake = await startFakeOpenAI({ apiKey: RIGHT_KEY });
t.teardown(fake.close);
const gone = await startFakeOpenAI();
await gone.close(); // a provider nobody answers for

const databaseUrl = await createTestDatabase(t);
// The unreachable case below names a tenant baseUrl on 127.0.0.1, which only the switch allows.
const { app, db, logs } = await buildTestApp(t, databaseUrl, {
  LOG_LEVEL: 'trace',
  OPENAI_BASE_URL: fake.url,
  NEW_TENANT_CREDITS_MICROS: '2500000',
  PROVIDER_ALLOW_PRIVATE_URLS: 'true',
});
const secret = Buffer.from(TEST_SECRET, 'base64');

type Person = { userId: string; email: string; token: string };
async function newPerson(): Promise<Person> {
  const userId = randomUUID();
  const email = `${userId}@example.test`;
  await db.query(sql.unsafe`insert into users (id, email) values (${userId}, ${email})`);
  return { userId, email, token: await signPlatformToken({ userId }, secret, 'http://localhost:3000') };
}
const bearer = (p: { token: string }) => ({ authorization: `Bearer ${p.token}` });
const init = (p: Person) => app.inject({ method: 'POST', url: '/api/onboarding/init', headers: bearer(p) });
const count = (query: ReturnType<typeof sql.unsafe>) =>
  db.oneFirst(sql.type(z.object({ n: z.number() }))`select count(*)::int as n from (${query}) q`);
const keysOf = (tenantId: string) => count(sql.unsafe`select 1 from provider_keys where tenant_id = ${tenantId}`);
const agentModel = (tenantId: string) =>
  db.oneFirst(
    sql.type(z.object({ model: z.string() }))`select model from agents where tenant_id = ${tenantId} and is_default`,
  );

const ada = await newPerson();
let adaTenant = '';

t.test('init: a new workspace with a default offline agent and starting credits; idempotent', async (t) => {
  t.equal((await app.inject({ method: 'POST', url: '/api/onboarding/init' })).statusCode, 401);
  const first = await init(ada);
  t.equal(first.statusCode, 201, first.body);
  const body = first.json();
  t.match(body, {
    tenantId: String,
    agentId: String,
    onboarding: { state: 'started', steps: { workspace: true, providerKey: false, model: false }, completedAt: null },
  });
  adaTenant = body.tenantId;

  const role = await db.oneFirst(sql.type(z.object({ role: z.string() }))`
    select role from tenant_memberships where tenant_id = ${adaTenant} and user_id = ${ada.userId}`);
  t.equal(role, 'admin');
  const agent = await db.one(sql.type(
    z.object({ id: z.string(), name: z.string(), model: z.string(), is_default: z.boolean() }),
  )`
    select id, name, model, is_default from agents where tenant_id = ${adaTenant}`);
  t.same(agent, { id: body.agentId, name: 'Assistant', model: 'builtin/offline', is_default: true });
  const credits = await db.oneFirst(
    sql.type(
      z.object({ b: z.coerce.number() }),
    )`select balance_micros as b from tenant_credits where tenant_id = ${adaTenant}`,
  );
  t.equal(credits, 2_500_000);
  const tenant = await app.inject({ url: `/api/tenants/${adaTenant}`, headers: bearer(ada) });
  t.match(tenant.json().settings, {
    timezone: 'UTC',
    defaultModel: 'builtin/offline',
    onboarding: { state: 'started' },
  });

  const again = await init(ada);
  t.equal(again.statusCode, 200);
  t.same(again.json(), body, 'the same state, nothing new');
  t.equal(await count(sql.unsafe`select 1 from tenant_memberships where user_id = ${ada.userId}`), 1);

  const mode = await app.inject({
    url: '/api/provider-keys/mode',
    headers: { ...bearer(ada), 'x-tenant-id': adaTenant },
  });
  t.same(mode.json(), {
    mode: 'platform_credits',
    providers: [],
    creditBalanceMicros: 2_500_000,
    creditBalance: '2.50',
  });
});

t.test('init: concurrent calls make one workspace; a tenant made by hand is the one set up', async (t) => {
  const bob = await newPerson();
  const answers = await Promise.all([init(bob), init(bob), init(bob)]);
  t.same(answers.map((a) => a.statusCode).sort(), [200, 200, 201]);
  t.equal(new Set(answers.map((a) => a.json().tenantId)).size, 1);
  t.equal(await count(sql.unsafe`select 1 from tenant_memberships where user_id = ${bob.userId}`), 1);

  const viewerOnly = await newPerson();
  await db.query(
    sql.unsafe`insert into tenant_memberships (tenant_id, user_id, role) values (${answers[0]!.json().tenantId}, ${viewerOnly.userId}, 'viewer')`,
  );
  const own = await init(viewerOnly);
  t.equal(own.statusCode, 201);
  t.not(own.json().tenantId, answers[0]!.json().tenantId, 'a Viewer elsewhere gets a workspace of their own');

  const member = await createMember(db, 'admin');
  const res = await app.inject({ method: 'POST', url: '/api/onboarding/init', headers: bearer(member) });
  t.equal(res.statusCode, 201);
  t.equal(res.json().tenantId, member.tenantId, 'no second tenant for someone who has one');
  t.equal(await count(sql.unsafe`select 1 from tenant_memberships where user_id = ${member.userId}`), 1);
});

t.test('models: no auth, every provider with prices, the offline model needs no key', async (t) => {
  const res = await app.inject({ url: '/api/onboarding/models' });
  t.equal(res.statusCode, 200);
  const { defaultModel, providers } = res.json();
  t.equal(defaultModel, 'builtin/offline');
  const builtin = providers.find((p: { id: string }) => p.id === 'builtin');
  t.match(builtin, {
    needsKey: false,
    acceptsOwnKey: false,
    platformCredits: true,
    models: [{ id: 'builtin/offline', model: 'offline', offline: true, needsKey: false }],
  });
  const openai = providers.find((p: { id: string }) => p.id === 'openai');
  t.match(openai, { needsKey: true, acceptsOwnKey: true, platformCredits: false });
  t.ok(openai.models.some((m: { id: string; offline: boolean }) => m.id === 'openai/gpt-4o-mini' && !m.offline));
  t.ok(
    openai.models.every((m: { inputPricePerMTokMicros: number }) => m.inputPricePerMTokMicros > 0),
    'priced',
  );
});

t.test('setup: a refused key is 400 and nothing is stored', async (t) => {
  const headers = { ...bearer(ada), 'x-tenant-id': adaTenant };
  const checks = fake.requests.length;
  const res = await app.inject({
    method: 'POST',
    url: '/api/onboarding/setup',
    headers,
    payload: { provider: 'openai', apiKey: 'sk-test-WRONGKEY-0000', model: 'gpt-4o-mini' },
  });
  t.same([res.statusCode, res.json().error], [400, 'invalid_provider_key']);
  t.equal(fake.requests.length, checks + 1, 'the provider was asked');
  t.equal(fake.requests.at(-1)!.apiKey, 'sk-test-WRONGKEY-0000');
  t.notMatch(res.body, /WRONGKEY/);
  t.equal(await keysOf(adaTenant), 0);
  t.equal(await agentModel(adaTenant), 'builtin/offline', 'the model is unchanged too');

  const unreachable = await app.inject({
    method: 'POST',
    url: '/api/onboarding/setup',
    headers,
    payload: { provider: 'openai', apiKey: RIGHT_KEY, baseUrl: gone.url },
  });
  t.same([unreachable.statusCode, unreachable.json().error], [502, 'provider_unreachable']);
  t.equal(await keysOf(adaTenant), 0);

  const unknownModel = await app.inject({
    method: 'POST',
    url: '/api/onboarding/setup',
    headers,
    payload: { provider: 'openai', apiKey: RIGHT_KEY, model: 'claude-sonnet-4-0' },
  });
  t.same([unknownModel.statusCode, unknownModel.json().error], [400, 'unknown_model']);
  t.equal(
    (
      await app.inject({
        method: 'POST',
        url: '/api/onboarding/setup',
        headers,
        payload: { provider: 'builtin', apiKey: RIGHT_KEY },
      })
    ).statusCode,
    400,
  );
  t.equal(await keysOf(adaTenant), 0);
});

t.test('setup: roles and tenants', async (t) => {
  const viewer = await newPerson();
  await db.query(
    sql.unsafe`insert into tenant_memberships (tenant_id, user_id, role) values (${adaTenant}, ${viewer.userId}, 'viewer')`,
  );
  const payload = { provider: 'openai', apiKey: RIGHT_KEY };
  const asViewer = await app.inject({
    method: 'POST',
    url: '/api/onboarding/setup',
    headers: { ...bearer(viewer), 'x-tenant-id': adaTenant },
    payload,
  });
  t.equal(asViewer.statusCode, 403);
  const outsider = await createMember(db, 'admin');
  const foreign = await app.inject({
    method: 'POST',
    url: '/api/onboarding/setup',
    headers: { ...bearer(outsider), 'x-tenant-id': adaTenant },
    payload,
  });
  t.equal(foreign.statusCode, 404);
  t.equal(await keysOf(adaTenant), 0);
});

t.test('setup: an accepted key is saved and the default agent moves to the chosen model', async (t) => {
  const headers = { ...bearer(ada), 'x-tenant-id': adaTenant };
  const res = await app.inject({
    method: 'POST',
    url: '/api/onboarding/setup',
    headers,
    payload: { provider: 'openai', apiKey: RIGHT_KEY, model: 'openai/gpt-4o-mini' },
  });
  t.equal(res.statusCode, 200, res.body);
  t.match(res.json(), {
    provider: 'openai',
    masked: '••••••••9a8b',
    last4: '9a8b',
    model: 'openai/gpt-4o-mini',
    onboarding: { state: 'started', steps: { workspace: true, providerKey: true, model: true } },
  });
  t.notMatch(res.body, /RIGHTKEY/);
  t.equal(await agentModel(adaTenant), 'openai/gpt-4o-mini');
  const resolved = await app.inject({ url: '/api/provider-keys/openai/resolve', headers });
  t.equal(resolved.json().apiKey, RIGHT_KEY, 'stored the same way as PUT');
  t.match(logs(), /provider key saved by onboarding/);
  t.notMatch(logs(), /RIGHTKEY|WRONGKEY/, 'no key, accepted or refused, in any log line');
});

t.test('complete: Dashboard Auth, for a tenant one of whose Admins bought the license', async (t) => {
  const license = await createLicense(db, { purchaserEmail: ada.email.toUpperCase() });
  const token = await signDashboardToken({ licenseId: license.id }, secret, 'http://localhost:3000');
  const complete = (tenantId: string, auth = token) =>
    app.inject({
      method: 'POST',
      url: '/api/onboarding/complete',
      headers: { authorization: `Bearer ${auth}` },
      payload: { tenantId },
    });

  t.equal(
    (await app.inject({ method: 'POST', url: '/api/onboarding/complete', payload: { tenantId: adaTenant } }))
      .statusCode,
    401,
  );
  t.equal((await complete(adaTenant, ada.token)).statusCode, 401, 'a platform token is not a dashboard token');

  const done = await complete(adaTenant);
  t.equal(done.statusCode, 200, done.body);
  t.match(done.json(), { tenantId: adaTenant, onboarding: { state: 'completed', completedAt: String } });
  const again = await complete(adaTenant);
  t.equal(again.json().onboarding.completedAt, done.json().onboarding.completedAt, 'the first completion time stays');
  t.match((await init(ada)).json(), { tenantId: adaTenant, onboarding: { state: 'completed' } });

  const stranger = await createMember(db, 'admin');
  t.equal((await complete(stranger.tenantId)).statusCode, 404, 'a tenant without the purchaser as Admin');
  t.equal((await complete(randomUUID())).statusCode, 404);
  const other = await createLicense(db, { purchaserEmail: `${stranger.userId}@example.test` });
  const notStarted = await complete(
    stranger.tenantId,
    await signDashboardToken({ licenseId: other.id }, secret, 'http://localhost:3000'),
  );
  t.same([notStarted.statusCode, notStarted.json().error], [409, 'onboarding_not_started']);
});
