// A tenant's provider baseUrl may not lead to private addresses (SSRF): the
// save-time 400 on PUT /api/provider-keys/:provider and POST
// /api/onboarding/setup, the PROVIDER_ALLOW_PRIVATE_URLS switch, and the
// connection-time refusal of a chat turn whose stored URL turned private.
import t from 'tap';
import { z } from 'zod';
import { signRequest } from '../../../../api/plugins/hmac-signature.ts';
import { sql } from '../../../../core/db/pool.ts';
import { buildTestApp, type TestApi } from '../../../helpers/app.ts';
import { createTestDatabase } from '../../../helpers/db.ts';
import { startFakeOpenAI } from '../../../helpers/fake-providers.ts';
import { createMember, type Member } from '../../../helpers/fixtures.ts';
import { waitFor } from '../../../helpers/wait.ts';
import { startTestWorker } from '../../../helpers/worker.ts';

const RIGHT_KEY = 'sk-test-RIGHTKEY-9a8b';
const fake = await startFakeOpenAI({ apiKey: RIGHT_KEY, models: ['gpt-4o-mini'] });
t.teardown(fake.close);
const port = new URL(fake.url).port;

const databaseUrl = await createTestDatabase(t);
// Two api instances on one database: the default policy, and the switch on.
const strict = await buildTestApp(t, databaseUrl);
const open = await buildTestApp(t, databaseUrl, { PROVIDER_ALLOW_PRIVATE_URLS: 'true' });
const { db } = strict;

const admin = await createMember(db, 'admin');
const as = (m: Member) => ({ authorization: `Bearer ${m.token}`, 'x-tenant-id': m.tenantId });
const keysOf = (tenantId: string) =>
  db.oneFirst(
    sql.type(z.object({ n: z.number() }))`select count(*)::int as n from provider_keys where tenant_id = ${tenantId}`,
  );
const storedUrl = (tenantId: string) =>
  db.maybeOneFirst(
    sql.type(
      z.object({ base_url: z.string().nullable() }),
    )`select base_url from provider_keys where tenant_id = ${tenantId} and provider = 'openai'`,
  );

async function putKey(api: TestApi, m: Member, body: { apiKey: string; baseUrl?: string }) {
  const signingKey = (
    await api.app.inject({ url: '/api/provider-keys/signing-key', headers: { authorization: `Bearer ${m.token}` } })
  ).json().signingKey;
  const url = '/api/provider-keys/openai';
  const payload = JSON.stringify(body);
  const headers = {
    ...as(m),
    ...signRequest(signingKey, 'PUT', url, m.tenantId, payload),
    'content-type': 'application/json',
  };
  return api.app.inject({ method: 'PUT', url, headers, payload });
}
const setup = (api: TestApi, m: Member, baseUrl: string) =>
  api.app.inject({
    method: 'POST',
    url: '/api/onboarding/setup',
    headers: as(m),
    payload: { provider: 'openai', apiKey: RIGHT_KEY, baseUrl },
  });

const PRIVATE: Array<[string, RegExp]> = [
  [`http://127.0.0.1:${port}/v1`, /127\.0\.0\.1 is a loopback address/],
  ['http://169.254.169.254/', /169\.254\.169\.254 is a link-local address/],
  [`http://[::1]:${port}/v1`, /::1 is a loopback address/],
  ['http://10.0.0.5/', /10\.0\.0\.5 is a private network address/],
  [`http://localhost:${port}/v1`, /localhost is a loopback name/],
];
const CREDENTIALS = 'http://user:pass@models.example.com/v1';

t.test('PUT: a private or credential-bearing baseUrl is 400 invalid_base_url and nothing is stored', async (t) => {
  t.same(
    [strict.config.providers.allowPrivateUrls, open.config.providers.allowPrivateUrls],
    [false, true],
    'off by default',
  );
  for (const [baseUrl, reason] of [...PRIVATE, [CREDENTIALS, /user name or password/] as [string, RegExp]]) {
    const res = await putKey(strict, admin, { apiKey: RIGHT_KEY, baseUrl });
    t.equal(res.statusCode, 400, baseUrl);
    t.match(res.json(), { error: 'invalid_base_url', message: reason }, baseUrl);
  }
  const ftp = await putKey(strict, admin, { apiKey: RIGHT_KEY, baseUrl: 'ftp://models.example.com/' });
  t.match([ftp.statusCode, ftp.json().message], [400, /http:\/\/ or https:\/\//]);
  t.equal(await keysOf(admin.tenantId), 0);

  const fine = await putKey(strict, admin, { apiKey: RIGHT_KEY, baseUrl: 'https://1.1.1.1/v1' });
  t.match([fine.statusCode, fine.json().baseUrl], [200, 'https://1.1.1.1/v1'], 'a public address is saved');
  t.equal((await putKey(strict, admin, { apiKey: RIGHT_KEY })).statusCode, 200, 'no baseUrl: the operator default');
  await db.query(sql.unsafe`delete from provider_keys where tenant_id = ${admin.tenantId}`);
});

t.test('setup: the same refusals come before the key check, so the URL is never called', async (t) => {
  const asked = fake.requests.length;
  for (const [baseUrl, reason] of [...PRIVATE, [CREDENTIALS, /user name or password/] as [string, RegExp]]) {
    const res = await setup(strict, admin, baseUrl);
    t.same([res.statusCode, res.json().error], [400, 'invalid_base_url'], baseUrl);
    t.match(res.json().message, reason);
  }
  t.equal(fake.requests.length, asked, 'the fake provider received nothing');
  t.equal(await keysOf(admin.tenantId), 0);
});

t.test('with PROVIDER_ALLOW_PRIVATE_URLS the private URLs are accepted; credentials still are not', async (t) => {
  for (const [baseUrl] of PRIVATE) {
    // Another key than above: an identical signed request within a second is a replay.
    const res = await putKey(open, admin, { apiKey: 'sk-test-OPEN-1234', baseUrl });
    t.equal(res.statusCode, 200, `${baseUrl} ${res.body}`);
    t.equal(await storedUrl(admin.tenantId), baseUrl.replace(/\/+$/, ''));
  }
  t.equal((await putKey(open, admin, { apiKey: 'sk-test-OPEN-1234', baseUrl: CREDENTIALS })).statusCode, 400);

  const asked = fake.requests.length;
  const res = await setup(open, admin, `http://localhost:${port}/v1`);
  t.equal(res.statusCode, 200, res.body);
  t.equal(fake.requests.length, asked + 1, 'the key was checked at the private URL');
  t.equal(await storedUrl(admin.tenantId), `http://localhost:${port}/v1`);
});

t.test(
  'a stored URL that is private at call time fails the chat turn as provider_unavailable; nothing is sent',
  async (t) => {
    // Saved while the switch was on (above): a stand-in for a name that
    // resolved publicly when saved and privately now (DNS rebinding).
    t.equal(await storedUrl(admin.tenantId), `http://localhost:${port}/v1`);
    await db.query(sql.unsafe`update tenants set plan = 'pro' where id = ${admin.tenantId}`);
    await startTestWorker(t, databaseUrl); // the default policy
    const asked = fake.requests.length;

    const session = await strict.app.inject({
      method: 'POST',
      url: '/api/chat/sessions',
      headers: as(admin),
      payload: { title: 'T', model: 'openai/gpt-4o-mini' },
    });
    t.equal(session.statusCode, 201, session.body);
    const sent = await strict.app.inject({
      method: 'POST',
      url: '/api/chat/send',
      headers: { ...as(admin), 'idempotency-key': `policy-turn-${Date.now()}` },
      payload: { sessionId: session.json().id, message: 'hello' },
    });
    t.equal(sent.statusCode, 202, sent.body);
    const Row = z.object({ status: z.string(), error: z.object({ code: z.string(), message: z.string() }).nullable() });
    const failed = await waitFor('the turn to fail', async () => {
      const row = await db.one(sql.type(Row)`select status, error from jobs where id = ${sent.json().jobId}`);
      return row.error ? row : null;
    });
    t.equal(failed.error!.code, 'provider_unavailable', 'the code of an unreachable provider (retried like one)');
    t.equal(fake.requests.length, asked, 'the fake provider received no request');
  },
);
