// Provider keys: the HMAC + Auth signature (valid, missing, stale, altered,
// replayed), masking everywhere but resolve (responses and log lines), roles
// and tenant isolation, key rotation, and the credentials/credits functions
// the chat worker uses.
import t from 'tap';
import { z } from 'zod';
import { signRequest } from '../../../../api/plugins/hmac-signature.ts';
import { Keyring } from '../../../../core/crypto/keyring.ts';
import { sql } from '../../../../core/db/pool.ts';
import {
  creditBalance,
  credentialsFor,
  formatDollars,
  putKey,
  spendCredits,
} from '../../../../core/provider-keys/keys.ts';
import { buildTestApp } from '../../../helpers/app.ts';
import { createTestDatabase } from '../../../helpers/db.ts';
import { createMember, type Member } from '../../../helpers/fixtures.ts';

const databaseUrl = await createTestDatabase(t);
const { app, db, config, logs } = await buildTestApp(t, databaseUrl, {
  LOG_LEVEL: 'trace',
  PLATFORM_OPENAI_API_KEY: 'sk-platform-PLATFORMKEY',
});

const owner = await createMember(db, 'admin');
const viewer = await createMember(db, 'viewer');
await db.query(
  sql.unsafe`insert into tenant_memberships (tenant_id, user_id, role) values (${owner.tenantId}, ${viewer.userId}, 'viewer')`,
);
const outsider = await createMember(db, 'admin');

const SECRET_KEY = 'sk-test-SUPERSECRET-abcd';
const as = (m: Member, tenantId = m.tenantId) => ({ authorization: `Bearer ${m.token}`, 'x-tenant-id': tenantId });

const signingKeys = new Map<string, string>();
async function signingKeyOf(m: Member): Promise<string> {
  if (!signingKeys.has(m.userId)) {
    const res = await app.inject({
      url: '/api/provider-keys/signing-key',
      headers: { authorization: `Bearer ${m.token}` },
    });
    signingKeys.set(m.userId, res.json().signingKey);
  }
  return signingKeys.get(m.userId)!;
}

type SendOptions = {
  tenantId?: string;
  nowMs?: number;
  signBody?: string;
  signPath?: string;
  signTenant?: string;
  signer?: Member;
  headers?: Record<string, string>;
};

/** A signed PUT or DELETE; options alter what is signed to build refusals. */
async function send(method: 'PUT' | 'DELETE', m: Member, provider: string, body: object | null, o: SendOptions = {}) {
  const url = `/api/provider-keys/${provider}`;
  const payload = body === null ? '' : JSON.stringify(body);
  const tenantId = o.tenantId ?? m.tenantId;
  const signature = signRequest(
    await signingKeyOf(o.signer ?? m),
    method,
    o.signPath ?? url,
    o.signTenant ?? tenantId,
    o.signBody ?? payload,
    o.nowMs,
  );
  const headers = {
    ...as(m, tenantId),
    ...signature,
    ...(body === null ? {} : { 'content-type': 'application/json' }),
    ...o.headers,
  };
  return app.inject({ method, url, headers, payload });
}
const put = (m: Member, provider: string, body: object, o?: SendOptions) => send('PUT', m, provider, body, o);
const keyCount = () => db.oneFirst(sql.type(z.object({ n: z.number() }))`select count(*)::int as n from provider_keys`);

t.test('signing key: needs the platform token, is per user, not cached', async (t) => {
  t.equal((await app.inject({ url: '/api/provider-keys/signing-key' })).statusCode, 401);
  const res = await app.inject({
    url: '/api/provider-keys/signing-key',
    headers: { authorization: `Bearer ${owner.token}` },
  });
  t.equal(res.statusCode, 200);
  t.match(res.json(), { signingKey: /^pks_[A-Za-z0-9_-]{43}$/, algorithm: 'HMAC-SHA256', expiresAt: String });
  t.equal(res.headers['cache-control'], 'no-store');
  t.ok(Date.parse(res.json().expiresAt) > Date.now() + 86_400_000, 'valid for more than a day');
  t.not(await signingKeyOf(owner), await signingKeyOf(viewer), 'each user has their own');
});

t.test('a signed PUT saves the key sealed; every view but resolve is masked', async (t) => {
  const res = await put(owner, 'openai', { apiKey: SECRET_KEY });
  t.equal(res.statusCode, 200, res.body);
  t.same(Object.keys(res.json()).sort(), ['baseUrl', 'last4', 'masked', 'provider', 'updatedAt']);
  t.match(res.json(), { provider: 'openai', masked: '••••••••abcd', last4: 'abcd', baseUrl: null });
  t.notMatch(res.body, /SUPERSECRET/);

  const stored = await db.one(sql.type(z.object({ ciphertext: z.string(), key_id: z.string() }))`
    select ciphertext, key_id from provider_keys where tenant_id = ${owner.tenantId} and provider = 'openai'`);
  t.notMatch(stored.ciphertext, /SUPERSECRET/, 'sealed at rest');
  t.equal(stored.key_id, Keyring.fromConfig(config).currentId);

  const list = await app.inject({ url: '/api/provider-keys/', headers: as(viewer, owner.tenantId) });
  t.equal(list.statusCode, 200);
  t.match(list.json(), {
    keys: [{ provider: 'openai', masked: '••••••••abcd', last4: 'abcd', createdAt: String, updatedAt: String }],
  });
  t.notMatch(list.body, /SUPERSECRET/);
  const mode = await app.inject({ url: '/api/provider-keys/mode', headers: as(viewer, owner.tenantId) });
  t.same(mode.json(), { mode: 'user_provided', providers: ['openai'], creditBalanceMicros: 0, creditBalance: '0.00' });

  const resolved = await app.inject({ url: '/api/provider-keys/openai/resolve', headers: as(owner) });
  t.equal(resolved.statusCode, 200);
  t.same(resolved.json(), { provider: 'openai', apiKey: SECRET_KEY, baseUrl: null });
  t.equal(resolved.headers['cache-control'], 'no-store');

  const log = logs();
  const audit = log
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { msg?: string })
    .find((l) => l.msg === 'provider key resolved');
  t.match(audit, { tenantId: owner.tenantId, provider: 'openai', userId: owner.userId }, 'resolve is audit-logged');
  t.notMatch(log, /SUPERSECRET/, 'the key is in no log line');
  t.notMatch(log, new RegExp(await signingKeyOf(owner)), 'nor is the signing key');

  const rotated = await put(owner, 'openai', {
    apiKey: 'sk-test-NEWER-wxyz',
    baseUrl: 'https://proxy.example.test/v1/',
  });
  t.match(
    rotated.json(),
    { last4: 'wxyz', baseUrl: 'https://proxy.example.test/v1' },
    'replaced, trailing slash trimmed',
  );
  t.equal(await keyCount(), 1);
});

t.test('signature refusals: missing, stale, altered, foreign, replayed; nothing stored', async (t) => {
  const before = await keyCount();
  const body = { apiKey: 'sk-test-OTHER-1234' };
  const code = async (res: Awaited<ReturnType<typeof put>>) => [res.statusCode, res.json().error];

  const unsigned = await app.inject({
    method: 'PUT',
    url: '/api/provider-keys/anthropic',
    headers: as(owner),
    payload: body,
  });
  t.same(await code(unsigned), [401, 'signature_required']);
  t.match(unsigned.headers['www-authenticate'], /HMAC-SHA256/);
  const halfSigned = await put(owner, 'anthropic', body, { headers: { 'x-signature': '' } });
  t.same(await code(halfSigned), [401, 'invalid_signature'], 'an empty signature is malformed');
  const noTimestamp = await app.inject({
    method: 'PUT',
    url: '/api/provider-keys/anthropic',
    payload: body,
    headers: { ...as(owner), 'x-signature': `v1=${'0'.repeat(64)}` },
  });
  t.same(await code(noTimestamp), [401, 'signature_required']);
  t.same(await code(await put(owner, 'anthropic', body, { headers: { 'x-signature-timestamp': 'yesterday' } })), [
    401,
    'invalid_signature',
  ]);

  t.same(
    await code(await put(owner, 'anthropic', body, { nowMs: Date.now() - 330_000 })),
    [401, 'signature_expired'],
    'stale',
  );
  t.same(
    await code(await put(owner, 'anthropic', body, { nowMs: Date.now() + 330_000 })),
    [401, 'signature_expired'],
    'from the future',
  );
  t.same(
    await code(await put(owner, 'anthropic', body, { signBody: JSON.stringify({ apiKey: 'sk-test-SIGNED-0000' }) })),
    [401, 'invalid_signature'],
    'body differs',
  );
  t.same(
    await code(await put(owner, 'anthropic', body, { signBody: `${JSON.stringify(body)} ` })),
    [401, 'invalid_signature'],
    'raw bytes, not re-serialized JSON',
  );
  t.same(
    await code(await put(owner, 'anthropic', body, { signPath: '/api/provider-keys/openai' })),
    [401, 'invalid_signature'],
    'path differs',
  );
  t.same(
    await code(await put(owner, 'anthropic', body, { signTenant: outsider.tenantId })),
    [401, 'invalid_signature'],
    'tenant differs',
  );
  t.same(
    await code(await put(owner, 'anthropic', body, { signer: viewer })),
    [401, 'invalid_signature'],
    "another user's signing key",
  );
  t.equal(await keyCount(), before, 'no refused request stored anything');

  // One signed request, sent twice (and with the hex upper-cased): the second is a replay.
  const payload = JSON.stringify(body);
  const headers = {
    ...as(owner),
    'content-type': 'application/json',
    ...signRequest(await signingKeyOf(owner), 'PUT', '/api/provider-keys/anthropic', owner.tenantId, payload),
  };
  t.equal((await app.inject({ method: 'PUT', url: '/api/provider-keys/anthropic', headers, payload })).statusCode, 200);
  const replay = await app.inject({ method: 'PUT', url: '/api/provider-keys/anthropic', headers, payload });
  t.same(await code(replay), [401, 'signature_replayed']);
  const shouted = await app.inject({
    method: 'PUT',
    url: '/api/provider-keys/anthropic',
    payload,
    headers: { ...headers, 'x-signature': headers['x-signature'].toUpperCase().replace('V1=', 'v1=') },
  });
  t.same(await code(shouted), [401, 'signature_replayed'], 'upper-case hex is the same signature');
  const seen = await db.oneFirst(sql.type(z.object({ expires_at: z.string() }))`
    select expires_at from hmac_seen_signatures where tenant_id = ${owner.tenantId} limit 1`);
  t.ok(Date.parse(seen) > Date.now() + 600_000, 'remembered past the time its timestamp is acceptable');

  const text = await app.inject({
    method: 'PUT',
    url: '/api/provider-keys/anthropic',
    headers: {
      ...as(owner),
      'content-type': 'text/plain',
      ...signRequest(await signingKeyOf(owner), 'PUT', '/api/provider-keys/anthropic', owner.tenantId, 'x'),
    },
    payload: 'x',
  });
  t.equal(text.statusCode, 415, 'only JSON bodies are signed and parsed');
});

t.test('roles and tenants: Viewer reads masked, Admin writes and resolves, outsiders see nothing', async (t) => {
  const viewerPut = await put(viewer, 'openai', { apiKey: 'sk-test-VIEWER-0000' }, { tenantId: owner.tenantId });
  t.equal(viewerPut.statusCode, 403);
  t.equal((await send('DELETE', viewer, 'openai', null, { tenantId: owner.tenantId })).statusCode, 403);
  t.equal(
    (await app.inject({ url: '/api/provider-keys/openai/resolve', headers: as(viewer, owner.tenantId) })).statusCode,
    403,
  );

  for (const url of ['/api/provider-keys/', '/api/provider-keys/mode', '/api/provider-keys/openai/resolve']) {
    const res = await app.inject({ url, headers: as(outsider, owner.tenantId) });
    t.equal(res.statusCode, 404, `${url} for another tenant's member`);
    t.notMatch(res.body, /abcd|wxyz/);
  }
  t.equal(
    (await put(outsider, 'openai', { apiKey: 'sk-test-OUTSIDE-0000' }, { tenantId: owner.tenantId })).statusCode,
    404,
  );
  t.same(
    (await app.inject({ url: '/api/provider-keys/', headers: as(outsider) })).json(),
    { keys: [] },
    "the outsider's own tenant is empty",
  );
  t.equal(
    (await app.inject({ url: '/api/provider-keys/anthropic/resolve', headers: as(outsider) })).statusCode,
    404,
    'no key: 404',
  );
  t.equal((await app.inject({ url: '/api/provider-keys/' })).statusCode, 401);
});

t.test('bad provider or key: 400 before anything else', async (t) => {
  t.equal((await put(owner, 'builtin', { apiKey: 'sk-test-12345678' })).statusCode, 400, 'builtin takes no key');
  t.equal((await put(owner, 'nope', { apiKey: 'sk-test-12345678' })).statusCode, 400);
  t.equal((await app.inject({ url: '/api/provider-keys/nope/resolve', headers: as(owner) })).statusCode, 400);
  t.equal((await send('DELETE', owner, 'nope', null)).statusCode, 400);
  for (const apiKey of ['short', 'sk-test with space', 'sk-test-\u00e9\u00e9\u00e9\u00e9', 'x'.repeat(501)]) {
    t.equal((await put(owner, 'openrouter', { apiKey })).statusCode, 400, JSON.stringify(apiKey.slice(0, 20)));
  }
  t.equal((await put(owner, 'openrouter', { apiKey: 'sk-test-12345678', baseUrl: 'ftp://x.test' })).statusCode, 400);
});

t.test('DELETE: 204, then 404; mode falls back to platform credits', async (t) => {
  await db.query(
    sql.unsafe`insert into tenant_credits (tenant_id, balance_micros) values (${owner.tenantId}, 5001234)`,
  );
  const now = Date.now(); // pinned: the same second for the replay below
  t.equal((await send('DELETE', owner, 'openai', null, { nowMs: now })).statusCode, 204);
  t.equal(
    (await send('DELETE', owner, 'anthropic', null, { headers: { 'content-type': 'application/json' } })).statusCode,
    204,
    'JSON header, empty body',
  );
  const sameSecond = await send('DELETE', owner, 'openai', null, { nowMs: now });
  t.same(
    [sameSecond.statusCode, sameSecond.json().error],
    [401, 'signature_replayed'],
    'an identical request in the same second is a replay',
  );
  const again = await send('DELETE', owner, 'openai', null, { nowMs: now - 1000 });
  t.same([again.statusCode, again.json().error], [404, 'not_found']);
  const mode = await app.inject({ url: '/api/provider-keys/mode', headers: as(owner) });
  t.same(mode.json(), {
    mode: 'platform_credits',
    providers: [],
    creditBalanceMicros: 5_001_234,
    creditBalance: '5.001234',
  });
});

t.test('key rotation: a key sealed under the previous data key still resolves', async (t) => {
  const oldKey = Buffer.alloc(32, 7).toString('base64'); // the TEST_SECRET the first app sealed with
  const newKey = Buffer.alloc(32, 9).toString('base64');
  t.equal((await put(owner, 'openrouter', { apiKey: 'sk-or-ROTATED-9876' })).statusCode, 200);
  const rotated = await buildTestApp(t, databaseUrl, {
    DATA_ENCRYPTION_KEY: newKey,
    DATA_ENCRYPTION_KEY_PREVIOUS: oldKey,
  });
  const res = await rotated.app.inject({ url: '/api/provider-keys/openrouter/resolve', headers: as(owner) });
  t.equal(res.statusCode, 200);
  t.equal(res.json().apiKey, 'sk-or-ROTATED-9876');
  const withoutPrevious = await buildTestApp(t, databaseUrl, { DATA_ENCRYPTION_KEY: newKey });
  t.equal(
    (await withoutPrevious.app.inject({ url: '/api/provider-keys/openrouter/resolve', headers: as(owner) })).statusCode,
    500,
    'the retired key is needed',
  );
});

t.test('credentialsFor and credits, as the chat worker uses them', async (t) => {
  const keyring = Keyring.fromConfig(config);
  const tenant = (await createMember(db, 'admin')).tenantId;
  t.same(await credentialsFor(db, keyring, config, tenant, 'openai'), {
    source: 'platform_credits',
    apiKey: 'sk-platform-PLATFORMKEY',
    baseUrl: config.providers.baseUrls.openai,
  });
  t.equal(await credentialsFor(db, keyring, config, tenant, 'anthropic'), null, 'no own key and no platform key');
  t.same(await credentialsFor(db, keyring, config, tenant, 'builtin'), {
    source: 'platform_credits',
    baseUrl: undefined,
  });
  t.same(await credentialsFor(db, keyring, config, tenant, 'ollama'), {
    source: 'platform_credits',
    baseUrl: config.providers.baseUrls.ollama,
  });
  await putKey(db, keyring, {
    tenantId: tenant,
    provider: 'anthropic',
    apiKey: 'sk-ant-OWN-1111',
    userId: owner.userId,
  });
  t.same(await credentialsFor(db, keyring, config, tenant, 'anthropic'), {
    source: 'tenant_key',
    apiKey: 'sk-ant-OWN-1111',
    baseUrl: config.providers.baseUrls.anthropic,
  });

  t.equal(await spendCredits(db, tenant, 1), false, 'no credits row');
  await db.query(sql.unsafe`insert into tenant_credits (tenant_id, balance_micros) values (${tenant}, 100)`);
  const spends = await Promise.all(
    Array.from({ length: 5 }, () => db.transaction((tx) => spendCredits(tx, tenant, 30))),
  );
  t.equal(spends.filter(Boolean).length, 3, 'concurrent spends never overdraw');
  t.equal(await creditBalance(db, tenant), 10);
  t.equal(await spendCredits(db, tenant, 11), false);
  t.equal(await spendCredits(db, tenant, 10), true);
  t.equal(await creditBalance(db, tenant), 0);
  t.same(
    [formatDollars(5_000_000), formatDollars(1_234), formatDollars(120_000), formatDollars(0)],
    ['5.00', '0.001234', '0.12', '0.00'],
  );
});

t.test('OpenAPI documents the scheme on the signed routes', async (t) => {
  const doc = (await app.inject('/openapi.json')).json();
  const route = doc.paths['/api/provider-keys/{provider}'];
  for (const [method, operationId] of [
    ['put', 'putProviderKey'],
    ['delete', 'deleteProviderKey'],
  ] as const) {
    t.equal(route[method].operationId, operationId);
    t.match(route[method].description, /HMAC-SHA256/);
    const headers = route[method].parameters
      .filter((p: { in: string }) => p.in === 'header')
      .map((p: { name: string }) => p.name)
      .sort();
    t.same(headers, ['x-signature', 'x-signature-timestamp', 'x-tenant-id']);
    t.ok(route[method].responses['401']);
  }
  t.equal(doc.paths['/api/provider-keys/{provider}/resolve'].get.operationId, 'resolveProviderKey');
  t.same(
    doc.paths['/api/provider-keys/{provider}'].put.parameters.find((p: { in: string }) => p.in === 'path').schema.enum,
    ['openai', 'anthropic', 'openrouter', 'ollama'],
  );
});

t.test('saves, deletes and resolves leave an audit trail without the key', async (t) => {
  const { z } = await import('zod');
  const { sql } = await import('../../../../core/db/pool.ts');
  const rows = await db.any(sql.type(z.object({ action: z.string(), provider: z.string() }))`
    select action, provider from provider_key_audit order by id`);
  const actions = new Set(rows.map((r) => r.action));
  t.ok(actions.has('saved') && actions.has('resolved') && actions.has('deleted'), [...actions].join(','));
  const dump = JSON.stringify(await db.any(sql.unsafe`select * from provider_key_audit`));
  t.notMatch(dump, /sk-/, 'no key material in the audit rows');
});
