// The door agents come through: registration, the JWT-bearer grant, and the
// Agent API's bearer checks, driven by oauth4webapi as a stock client would.
import { generateKeyPair, SignJWT } from 'jose';
import * as oauth from 'oauth4webapi';
import t from 'tap';
import { z } from 'zod';
import { sql } from '../../../../core/db/pool.ts';
import { signAccessToken } from '../../../../core/identity/tokens.ts';
import { startTestServerAtOwnUrl } from '../../../helpers/app.ts';
import { createTestDatabase, rowCount } from '../../../helpers/db.ts';
import { waitFor } from '../../../helpers/wait.ts';

const databaseUrl = await createTestDatabase(t);
const api = await startTestServerAtOwnUrl(t, databaseUrl);
const { app, db, url: base } = api;
const JWT_BEARER = 'urn:ietf:params:oauth:grant-type:jwt-bearer';
const insecure = { [oauth.allowInsecureRequests]: true };
const count = (table: string) => rowCount(db, table);

async function register(body: object, remoteAddress = '10.1.0.1') {
  return app.inject({ method: 'POST', url: '/agent/identity', payload: body, remoteAddress });
}
async function exchange(assertion: string, resource = `${base}/api/agent`) {
  return app.inject({
    method: 'POST',
    url: '/oauth2/token',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    payload: new URLSearchParams({ grant_type: JWT_BEARER, assertion, resource }).toString(),
  });
}

t.test(
  'the anonymous flow with oauth4webapi: 401 challenge -> metadata -> JWT-bearer grant -> capabilities',
  async (t) => {
    const registered = await fetch(`${base}/agent/identity`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ type: 'anonymous' }),
    });
    t.equal(registered.status, 201);
    const registration = (await registered.json()) as {
      identity: { assertion: string; refresh_token: { value: string } };
      claim: { token: string };
      registration: { claim_state: string };
    };
    t.equal(registration.registration.claim_state, 'unclaimed');
    t.ok(registration.claim.token.startsWith('ct_'));

    // 1. The Agent API's 401 names its protected-resource metadata.
    const refused = await fetch(`${base}/api/agent/v1/capabilities`);
    t.equal(refused.status, 401);
    const challenge = refused.headers.get('www-authenticate')!;
    const metadataUrl = /resource_metadata="([^"]+)"/.exec(challenge)?.[1];
    t.equal(metadataUrl, `${base}/.well-known/oauth-protected-resource/api/agent`);

    // 2. Resource and authorization-server discovery.
    const resource = await oauth.processResourceDiscoveryResponse(
      new URL(`${base}/api/agent`),
      await oauth.resourceDiscoveryRequest(new URL(`${base}/api/agent`), insecure),
    );
    t.same(resource.bearer_methods_supported, ['header']);
    const issuer = new URL(resource.authorization_servers![0]!);
    const as = await oauth.processDiscoveryResponse(
      issuer,
      await oauth.discoveryRequest(issuer, { algorithm: 'oauth2', ...insecure }),
    );
    t.ok(as.grant_types_supported?.includes(JWT_BEARER));
    t.ok(as.authorization_endpoint, 'authorization_endpoint present (the MCP SDK requires it)');
    t.ok(as.response_types_supported);

    // 3. JWT-bearer grant with the resource.
    const client: oauth.Client = { client_id: 'agent' };
    const response = await oauth.genericTokenEndpointRequest(
      as,
      client,
      oauth.None(),
      JWT_BEARER,
      { assertion: registration.identity.assertion, resource: resource.resource },
      insecure,
    );
    const token = await oauth.processGenericTokenEndpointResponse(as, client, response);
    t.equal(token.token_type, 'bearer');
    t.ok(token.expires_in! > 200 && token.expires_in! <= 300, 'about five minutes');
    t.equal(token.scope, 'svc:companies:read svc:boards:read svc:agents:write', 'pre-claim scopes');

    // 4. Capabilities with the token.
    const caps = await oauth.protectedResourceRequest(
      token.access_token,
      'GET',
      new URL(`${base}/api/agent/v1/capabilities`),
      undefined,
      undefined,
      insecure,
    );
    t.equal(caps.status, 200);
    const body = (await caps.json()) as {
      claim: { state: string };
      next_actions: Array<{ action: string; endpoint?: string }>;
      plan: { company_work: boolean };
    };
    t.equal(body.claim.state, 'unclaimed');
    // Then the setup steps restore needs (capabilities.test.ts).
    t.match(
      body.next_actions.filter((a) => a.action !== 'complete_setup'),
      [{ action: 'claim_account', endpoint: `${base}/agent/identity/claim` }, { action: 'change_plan' }],
    );
    t.notMatch(JSON.stringify(body), /ct_|art_|eyJ/, 'no credential in the capability response');
    const me = await oauth.protectedResourceRequest(
      token.access_token,
      'GET',
      new URL(`${base}/api/agent/v1/me`),
      undefined,
      undefined,
      insecure,
    );
    t.match(await me.json(), {
      registration: { type: 'anonymous', claim_state: 'unclaimed' },
      workspace: { plan: 'free' },
    });
  },
);

t.test('service_auth: claim pending, no usable assertion', async (t) => {
  const res = await register({ type: 'service_auth', login_hint: 'owner@example.test' });
  t.equal(res.statusCode, 201);
  t.match(res.json(), {
    registration: { type: 'service_auth', claim_state: 'pending' },
    identity: null,
    claim: { token: /^ct_/ },
  });
  const bad = await register({ type: 'service_auth', login_hint: 'not an email' });
  t.equal(bad.statusCode, 400);
  t.same(bad.json(), { code: 'invalid_login_hint', message: bad.json().message });
  // An address no account can have (core/accounts/email.ts) would make a claim nobody can complete.
  for (const login_hint of ['kr\u0130s@example.test', `${'a'.repeat(65)}@example.test`, 'owner@example.test.']) {
    const refused = await register({ type: 'service_auth', login_hint });
    t.equal(refused.statusCode, 400, login_hint);
    t.equal(refused.json().code, 'invalid_login_hint');
  }
});

t.test('refresh rotates; a rotated-out token presented again revokes the current one', async (t) => {
  const first = (await register({ type: 'anonymous' })).json();
  const r1 = first.identity.refresh_token.value;
  const second = await register({ type: 'refresh', refresh_token: r1 });
  t.equal(second.statusCode, 200);
  t.equal(second.json().registration.id, first.registration.id, 'same registration');
  t.equal(second.json().claim, null);
  const r2 = second.json().identity.refresh_token.value;
  t.not(r2, r1);
  t.equal((await exchange(second.json().identity.assertion)).statusCode, 200, 'the new assertion works');
  const reuse = await register({ type: 'refresh', refresh_token: r1 });
  t.equal(reuse.statusCode, 401);
  t.equal(reuse.json().code, 'invalid_refresh_token');
  const afterReuse = await register({ type: 'refresh', refresh_token: r2 });
  t.equal(afterReuse.json().code, 'invalid_refresh_token', 'the current token was revoked by the reuse');
  const stored = await db.anyFirst(
    sql.type(z.object({ token_hash: z.string() }))`select token_hash from agent_refresh_tokens`,
  );
  t.notOk(
    stored.some((h) => h === r1 || h === r2),
    'refresh tokens stored only as hashes',
  );
});

t.test('token endpoint errors, in {code, message} plus OAuth error', async (t) => {
  const { identity } = (await register({ type: 'anonymous' })).json();
  const post = (form: Record<string, string>) =>
    app.inject({
      method: 'POST',
      url: '/oauth2/token',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      payload: new URLSearchParams(form).toString(),
    });
  const cases: Array<[Record<string, string>, string]> = [
    [{}, 'invalid_request'],
    [{ grant_type: 'client_credentials' }, 'unsupported_grant_type'],
    [{ grant_type: JWT_BEARER, resource: `${base}/api/agent` }, 'invalid_request'],
    [{ grant_type: JWT_BEARER, assertion: 'not-a-jwt', resource: `${base}/api/agent` }, 'invalid_request'],
    [
      { grant_type: JWT_BEARER, assertion: identity.assertion, resource: 'https://elsewhere.example/api' },
      'invalid_target',
    ],
    [{ grant_type: JWT_BEARER, assertion: identity.assertion }, 'invalid_target'],
  ];
  for (const [form, code] of cases) {
    const res = await post(form);
    t.equal(res.statusCode, 400, JSON.stringify(form).slice(0, 80));
    t.match(res.json(), { code, error: code, message: String, error_description: String });
  }
  // Signed by a key that is not ours.
  const { privateKey } = await generateKeyPair('ES256');
  const forged = await new SignJWT({ reg: 'x', typ: 'agent_assertion' })
    .setProtectedHeader({ alg: 'ES256', kid: 'other' })
    .setIssuer(base)
    .setSubject('p')
    .setAudience(`${base}/oauth2/token`)
    .setExpirationTime('5m')
    .sign(privateKey);
  t.match((await exchange(forged)).json(), { code: 'invalid_grant' });
  // A revoked registration.
  const other = (await register({ type: 'anonymous' })).json();
  await db.query(sql.unsafe`update agent_registrations set status = 'revoked' where id = ${other.registration.id}`);
  t.match((await exchange(other.identity.assertion)).json(), { code: 'invalid_grant' });
});

t.test('the Agent API refuses expired, foreign-audience and other-key tokens with the challenge', async (t) => {
  const { identity, registration } = (await register({ type: 'anonymous' })).json();
  const claims = {
    principalId: identity.principal_id,
    registrationId: registration.id,
    tenantId: identity.workspace_id,
    scopes: ['svc:boards:read' as const],
  };
  const call = (token: string) =>
    app.inject({ url: '/api/agent/v1/me', headers: { authorization: `Bearer ${token}` } });
  const expectChallenge = (res: Awaited<ReturnType<typeof call>>, code: string) => {
    t.equal(res.statusCode, 401);
    t.match(res.json(), { code, next_action: 'reauthenticate' });
    t.match(
      res.headers['www-authenticate'],
      `resource_metadata="${base}/.well-known/oauth-protected-resource/api/agent"`,
    );
  };
  expectChallenge(
    await call(await signAccessToken(app.idpKeys, base, `${base}/api/agent`, claims, -60)),
    'invalid_credential',
  );
  const mcpToken = (await exchange(identity.assertion, `${base}/mcp`)).json().access_token;
  expectChallenge(await call(mcpToken), 'invalid_credential');
  const { privateKey } = await generateKeyPair('ES256');
  const foreign = await new SignJWT({ reg: registration.id, tid: identity.workspace_id, scope: 'svc:boards:read' })
    .setProtectedHeader({ alg: 'ES256', kid: 'other', typ: 'at+jwt' })
    .setIssuer(base)
    .setSubject(identity.principal_id)
    .setAudience(`${base}/api/agent`)
    .setExpirationTime('5m')
    .sign(privateKey);
  expectChallenge(await call(foreign), 'invalid_credential');
  expectChallenge(await app.inject({ url: '/api/agent/v1/me' }), 'invalid_credential');

  const good = (await exchange(identity.assertion)).json().access_token;
  t.equal((await call(good)).statusCode, 200);
  t.equal((await call(good)).statusCode, 200, 'and again, from the replica cache');
  // A change reaches every replica's cache by NOTIFY within moments.
  const refusedWith = (code: string) =>
    waitFor(
      `a ${code} refusal`,
      async () => {
        const res = await call(good);
        return res.statusCode === 401 && res.json().code === code ? res : null;
      },
      5_000,
    );
  await db.query(sql.unsafe`update agent_principals set status = 'unlinked' where id = ${identity.principal_id}`);
  expectChallenge(await refusedWith('principal_not_linked'), 'principal_not_linked');
  await db.query(sql.unsafe`update agent_registrations set status = 'revoked' where id = ${registration.id}`);
  expectChallenge(await refusedWith('registration_revoked'), 'registration_revoked');
});

t.test('a rotated-out signing key still verifies what it signed; JWKS lists both', async (t) => {
  const { identity } = (await register({ type: 'anonymous' })).json();
  const before = (await exchange(identity.assertion)).json().access_token;
  const newKid = await app.idpKeys.rotate();
  const jwks = (await app.inject('/.well-known/jwks.json')).json();
  t.ok(jwks.keys.length >= 2, 'old and new key published');
  t.ok(jwks.keys.some((k: { kid: string }) => k.kid === newKid));
  t.notOk(
    jwks.keys.some((k: { d?: string }) => k.d),
    'no private parts',
  );
  t.equal(
    (await app.inject({ url: '/api/agent/v1/me', headers: { authorization: `Bearer ${before}` } })).statusCode,
    200,
    'token of the old key',
  );
  t.equal((await exchange(identity.assertion)).statusCode, 200, 'assertion of the old key');
});

t.test('bad registration bodies store nothing; disabled methods say so', async (t) => {
  const before = await Promise.all(['agent_registrations', 'tenants'].map(count));
  for (const body of [{}, { type: 'magic' }, { type: 'refresh' }, { type: 'service_auth' }]) {
    const res = await register(body);
    t.equal(res.statusCode, 400, JSON.stringify(body));
    t.type(res.json().code, 'string');
  }
  t.same(await Promise.all(['agent_registrations', 'tenants'].map(count)), before, 'nothing stored');
  const locked = await startTestServerAtOwnUrl(t, databaseUrl, {
    ANONYMOUS_REGISTRATION_DISABLED: 'true',
    SERVICE_AUTH_REGISTRATION_DISABLED: 'true',
  });
  t.match(
    (await locked.app.inject({ method: 'POST', url: '/agent/identity', payload: { type: 'anonymous' } })).json(),
    { code: 'anonymous_registration_disabled' },
  );
  t.match(
    (
      await locked.app.inject({
        method: 'POST',
        url: '/agent/identity',
        payload: { type: 'service_auth', login_hint: 'a@b.test' },
      })
    ).json(),
    { code: 'service_auth_registration_disabled' },
  );
});

t.test('anonymous registration is rate-limited per IP', async (t) => {
  let last;
  for (let i = 0; i < 21; i++) last = await register({ type: 'anonymous' }, '10.66.0.1');
  t.equal(last!.statusCode, 429);
  t.match(last!.json(), { code: 'rate_limit_exceeded', retry_after: Number });
  t.ok(Number(last!.headers['retry-after']) > 0);
});

t.test('protected-resource metadata for both resources', async (t) => {
  for (const path of ['api/agent', 'mcp']) {
    const doc = (await app.inject(`/.well-known/oauth-protected-resource/${path}`)).json();
    t.match(doc, {
      resource: `${base}/${path}`,
      authorization_servers: [base],
      bearer_methods_supported: ['header'],
      resource_documentation: `${base}/auth.md`,
    });
  }
});

t.test('auth.md describes this deployment', async (t) => {
  const res = await app.inject('/auth.md');
  t.equal(res.statusCode, 200);
  t.match(res.headers['content-type'], /text\/markdown/);
  t.match(res.body, `POST ${base}/agent/identity`);
  t.match(res.body, `resource=${encodeURIComponent(`${base}/api/agent`)}`);
  t.match(res.body, /Scopes before a claim: `svc:companies:read`, `svc:boards:read`, `svc:agents:write`/);
});

t.test('after a claim the assertion yields post-claim scopes and capabilities say claimed', async (t) => {
  const { createUser } = await import('../../../../core/accounts/users.ts');
  const { agent, confirmedClaim, PASSWORD } = await import('./claim-flow.ts');
  await createUser(db, { email: 'claimer@example.test', password: PASSWORD });
  const claimed = await confirmedClaim(app, db, 'claimer@example.test', { type: 'service_auth' });
  const done = await agent(app).complete(claimed.reg.claimToken, claimed.code);
  t.equal(done.statusCode, 200);
  const token = (await exchange(done.json().identity.assertion)).json();
  t.equal(token.scope, 'svc:companies:read svc:boards:read svc:boards:publish svc:agents:write');
  const caps = (
    await app.inject({ url: '/api/agent/v1/capabilities', headers: { authorization: `Bearer ${token.access_token}` } })
  ).json();
  t.equal(caps.claim.state, 'claimed');
  t.notOk(
    caps.next_actions.some((a: { action: string }) => a.action === 'claim_account'),
    'no claim step left',
  );
  const refreshed = await register({ type: 'refresh', refresh_token: done.json().identity.refresh_token.value });
  t.equal(refreshed.statusCode, 200, 'the refresh token from the claim works');
});

t.test('the authorization_endpoint is a page a person can open', async (t) => {
  const meta = (await app.inject('/.well-known/oauth-authorization-server')).json();
  const res = await app.inject(new URL(meta.authorization_endpoint).pathname);
  t.equal(res.statusCode, 200);
  t.match(res.headers['content-type'], /text\/html/);
  t.match(res.body, /claim link your agent gave you/);
});
