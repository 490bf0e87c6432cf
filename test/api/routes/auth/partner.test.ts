// Logins through "partner" against a real OpenID Connect provider
// (oidc-provider on loopback): the web code exchange with PKCE, the iOS ID
// token, the access token checked with the provider, the linking rule, the
// refusals, and the external-login limit.
import { exportJWK, generateKeyPair, UnsecuredJWT } from 'jose';
import * as oidc from 'openid-client';
import t from 'tap';
import { z } from 'zod';
import { createUser } from '../../../../core/accounts/users.ts';
import { sql } from '../../../../core/db/pool.ts';
import { buildTestApp } from '../../../helpers/app.ts';
import { createTestDatabase, rowCount } from '../../../helpers/db.ts';
import { startOidcServer } from '../../../helpers/oidc-server.ts';

const WEB_REDIRECT = 'http://127.0.0.1:9/app/callback';
const IOS_REDIRECT = 'com.example.app:/oauth2redirect';
const OTHER_REDIRECT = 'http://127.0.0.1:9/other';
const SECRET = 'platform-web-secret-0123456789abcdef';

// A second web client that authenticates with a private key (private_key_jwt).
const { privateKey: clientKey, publicKey: clientPublicKey } = await generateKeyPair('ES256', { extractable: true });
const clientJwk = { ...(await exportJWK(clientKey)), kid: 'platform-key-1', alg: 'ES256' };

const op = await startOidcServer(t, {
  clients: [
    {
      client_id: 'platform-web-pkjwt',
      redirect_uris: [WEB_REDIRECT],
      token_endpoint_auth_method: 'private_key_jwt',
      token_endpoint_auth_signing_alg: 'ES256',
      jwks: { keys: [{ ...(await exportJWK(clientPublicKey)), kid: 'platform-key-1', alg: 'ES256', use: 'sig' }] },
    },
    {
      client_id: 'platform-web',
      client_secret: SECRET,
      redirect_uris: [WEB_REDIRECT],
      token_endpoint_auth_method: 'client_secret_post',
    },
    {
      client_id: 'platform-ios',
      application_type: 'native',
      token_endpoint_auth_method: 'none',
      redirect_uris: [IOS_REDIRECT],
    },
    {
      client_id: 'other-app',
      client_secret: 'other-secret-0123456789abcdef',
      redirect_uris: [OTHER_REDIRECT],
      token_endpoint_auth_method: 'client_secret_post',
    },
  ],
  accounts: [
    { sub: 'alice-sub', email: 'alice@example.com', email_verified: true, name: 'Alice Example' },
    { sub: 'bob-sub', email: 'bob@example.com', email_verified: false },
    { sub: 'carol-sub', email: 'Carol@Example.com', email_verified: true },
    { sub: 'dan-sub' },
  ],
});

const databaseUrl = await createTestDatabase(t);
const { app, db, logs } = await buildTestApp(t, databaseUrl, {
  PARTNER_ISSUER: op.issuer,
  PARTNER_CLIENT_ID: 'platform-web',
  PARTNER_CLIENT_SECRET: SECRET,
  PARTNER_IOS_CLIENT_ID: 'platform-ios',
  PARTNER_REDIRECT_URIS: WEB_REDIRECT,
  LOG_LEVEL: 'debug',
});

// Each request from its own address, except where the external-login limit is the point.
let ip = 0;
const post = (url: string, payload: object, remoteAddress = `10.1.${Math.floor(++ip / 250)}.${ip % 250}`) =>
  app.inject({ method: 'POST', url, payload, remoteAddress });
const count = (table: string) => rowCount(db, table);

/** A code for `clientId` as its app would get it after `accountId` signs in. */
async function authorize(
  accountId: string,
  clientId = 'platform-web',
  redirectUri = WEB_REDIRECT,
  extra: Record<string, string> = {},
) {
  op.next = { accountId };
  const codeVerifier = oidc.randomPKCECodeVerifier();
  const out = await op.authorize({
    client_id: clientId,
    redirect_uri: redirectUri,
    response_type: 'code',
    scope: 'openid email profile',
    code_challenge: await oidc.calculatePKCECodeChallenge(codeVerifier),
    code_challenge_method: 'S256',
    ...extra,
  });
  if (out.kind !== 'redirect') throw new Error('expected a redirect');
  return { code: out.location.searchParams.get('code')!, codeVerifier };
}

/** Tokens for a client, straight from the provider (what an app holds after its own sign-in). */
async function tokensFor(accountId: string, clientId: string, redirectUri: string, secret?: string, nonce?: string) {
  const { code, codeVerifier } = await authorize(accountId, clientId, redirectUri, nonce ? { nonce } : {});
  const config = await oidc.discovery(
    new URL(op.issuer),
    clientId,
    secret
      ? { client_secret: secret, token_endpoint_auth_method: 'client_secret_post' }
      : { token_endpoint_auth_method: 'none' },
    undefined,
    { execute: [oidc.allowInsecureRequests] },
  );
  const url = new URL(redirectUri);
  url.searchParams.set('code', code);
  url.searchParams.set('iss', op.issuer);
  const tokens = await oidc.authorizationCodeGrant(config, url, {
    pkceCodeVerifier: codeVerifier,
    expectedNonce: nonce,
    idTokenExpected: true,
  });
  return tokens;
}

t.test('not configured: 503 auth_method_disabled naming the settings', async (t) => {
  const bare = await buildTestApp(t, databaseUrl);
  const res = await bare.app.inject({
    method: 'POST',
    url: '/api/auth/partner',
    payload: { code: 'x', codeVerifier: 'a'.repeat(43), redirectUri: WEB_REDIRECT },
  });
  t.equal(res.statusCode, 503);
  t.match(res.json(), {
    error: 'auth_method_disabled',
    message: /PARTNER_ISSUER.*PARTNER_CLIENT_ID.*PARTNER_CLIENT_SECRET.*PARTNER_REDIRECT_URIS/,
  });
  const ios = await bare.app.inject({
    method: 'POST',
    url: '/api/auth/partner-ios',
    payload: { idToken: 'a.b.c', nonce: 'n' },
  });
  t.match(ios.json(), { error: 'auth_method_disabled', message: /PARTNER_IOS_CLIENT_ID/ });
});

t.test('web: code + PKCE → the login payload; the same subject again → the same user', async (t) => {
  const first = await post('/api/auth/partner', { ...(await authorize('alice-sub')), redirectUri: WEB_REDIRECT });
  t.equal(first.statusCode, 200, first.body);
  const body = first.json();
  t.match(body, { tokenType: 'Bearer', newUser: true, user: { email: 'alice@example.com', name: 'Alice Example' } });
  t.ok(body.refreshToken);
  const me = await app.inject({ url: '/api/auth/me', headers: { authorization: `Bearer ${body.token}` } });
  t.equal(me.json().email, 'alice@example.com');

  const again = await post('/api/auth/partner', { ...(await authorize('alice-sub')), redirectUri: WEB_REDIRECT });
  t.equal(again.statusCode, 200);
  t.match(again.json(), { newUser: false, user: { id: body.user.id } });
  const identities = await db.any(sql.type(z.object({ subject: z.string(), email_verified: z.boolean() }))`
    select subject, email_verified from user_identities where provider = 'partner' and user_id = ${body.user.id}`);
  t.same(identities, [{ subject: 'alice-sub', email_verified: true }]);
});

t.test('web refusals: replayed code, wrong verifier, foreign redirect URI, nonce mismatch', async (t) => {
  const tokensBefore = await count('auth_refresh_tokens');
  const grant = await authorize('alice-sub');
  t.equal((await post('/api/auth/partner', { ...grant, redirectUri: WEB_REDIRECT })).statusCode, 200);
  const replay = await post('/api/auth/partner', { ...grant, redirectUri: WEB_REDIRECT });
  t.equal(replay.statusCode, 401);
  t.match(replay.json(), { error: 'invalid_code', message: /invalid_grant/ });

  const wrongVerifier = await post('/api/auth/partner', {
    code: (await authorize('alice-sub')).code,
    codeVerifier: oidc.randomPKCECodeVerifier(),
    redirectUri: WEB_REDIRECT,
  });
  t.match(wrongVerifier.json(), { error: 'invalid_code' });

  const foreign = await post('/api/auth/partner', {
    ...(await authorize('alice-sub')),
    redirectUri: 'https://elsewhere.example/cb',
  });
  t.equal(foreign.statusCode, 400);
  t.match(foreign.json(), { error: 'invalid_redirect_uri' });

  const withNonce = await authorize('alice-sub', 'platform-web', WEB_REDIRECT, { nonce: 'the-real-nonce' });
  const nonceMismatch = await post('/api/auth/partner', {
    ...withNonce,
    redirectUri: WEB_REDIRECT,
    nonce: 'another-nonce',
  });
  t.equal(nonceMismatch.statusCode, 401);
  t.match(nonceMismatch.json(), { error: 'invalid_id_token', message: /nonce/ });
  t.equal(await count('auth_refresh_tokens'), tokensBefore + 1, 'only the one good login issued a refresh token');
});

t.test('linking: a verified e-mail links to the existing account; unverified or missing creates nothing', async (t) => {
  const carol = await createUser(db, { email: 'carol@example.com', password: 'carol-password-1' });
  const linked = await post('/api/auth/partner', { ...(await authorize('carol-sub')), redirectUri: WEB_REDIRECT });
  t.equal(linked.statusCode, 200, linked.body);
  t.match(linked.json(), { newUser: false, user: { id: carol.id } });

  const users = await count('users');
  const identities = await count('user_identities');
  const unverified = await post('/api/auth/partner', { ...(await authorize('bob-sub')), redirectUri: WEB_REDIRECT });
  t.equal(unverified.statusCode, 403);
  t.match(unverified.json(), { error: 'email_not_verified' });
  const noEmail = await post('/api/auth/partner', { ...(await authorize('dan-sub')), redirectUri: WEB_REDIRECT });
  t.equal(noEmail.statusCode, 403);
  t.match(noEmail.json(), { error: 'email_required' });
  t.equal(await count('users'), users, 'no user created');
  t.equal(await count('user_identities'), identities, 'nothing linked');
});

t.test('iOS: an ID token issued to the iOS client with its nonce', async (t) => {
  const tokens = await tokensFor('alice-sub', 'platform-ios', IOS_REDIRECT, undefined, 'ios-nonce-1');
  const idToken = tokens.id_token!;
  const ok = await post('/api/auth/partner-ios', { idToken, nonce: 'ios-nonce-1' });
  t.equal(ok.statusCode, 200, ok.body);
  t.match(ok.json(), { newUser: false, user: { email: 'alice@example.com' } });

  const wrongNonce = await post('/api/auth/partner-ios', { idToken, nonce: 'ios-nonce-2' });
  t.equal(wrongNonce.statusCode, 401);
  t.match(wrongNonce.json(), { error: 'invalid_id_token', message: /nonce/ });

  const other = await tokensFor('alice-sub', 'other-app', OTHER_REDIRECT, 'other-secret-0123456789abcdef', 'n-other');
  const otherAudience = await post('/api/auth/partner-ios', { idToken: other.id_token!, nonce: 'n-other' });
  t.equal(otherAudience.statusCode, 401);
  t.match(otherAudience.json(), { error: 'invalid_id_token', message: /aud/ });

  const now = Math.floor(Date.now() / 1000);
  const claims = {
    iss: op.issuer,
    aud: 'platform-ios',
    sub: 'alice-sub',
    email: 'alice@example.com',
    email_verified: true,
    nonce: 'n',
  };
  const expired = await post('/api/auth/partner-ios', {
    idToken: await op.sign({ ...claims, iat: now - 7200, exp: now - 3600 }),
    nonce: 'n',
  });
  t.match(expired.json(), { error: 'invalid_id_token', message: /expired/ });
  const unsigned = new UnsecuredJWT({ ...claims, iat: now, exp: now + 600 }).encode();
  t.match((await post('/api/auth/partner-ios', { idToken: unsigned, nonce: 'n' })).json(), {
    error: 'invalid_id_token',
  });
  const { privateKey } = await generateKeyPair('RS256', { extractable: true });
  const forged = await op.sign(
    { ...claims, iat: now, exp: now + 600 },
    { key: { ...(await exportJWK(privateKey)), alg: 'RS256' } },
  );
  const forgedRes = await post('/api/auth/partner-ios', { idToken: forged, nonce: 'n' });
  t.equal(forgedRes.statusCode, 401);
  t.match(forgedRes.json(), { error: 'invalid_id_token', message: /signature/ });
  const good = await post('/api/auth/partner-ios', {
    idToken: await op.sign({ ...claims, iat: now, exp: now + 600 }),
    nonce: 'n',
  });
  t.equal(good.statusCode, 200, 'the same claims signed by the provider pass');
});

t.test('access token: checked with the provider (introspection + userinfo), never by decoding', async (t) => {
  const tokens = await tokensFor('alice-sub', 'platform-web', WEB_REDIRECT, SECRET);
  const ok = await post('/api/auth/partner-token', { accessToken: tokens.access_token });
  t.equal(ok.statusCode, 200, ok.body);
  t.match(ok.json(), { newUser: false, user: { email: 'alice@example.com' } });
  t.ok(
    op.requests.some((r) => r.path === '/token/introspection'),
    'the provider was asked',
  );

  const other = await tokensFor('alice-sub', 'other-app', OTHER_REDIRECT, 'other-secret-0123456789abcdef');
  const foreign = await post('/api/auth/partner-token', { accessToken: other.access_token });
  t.equal(foreign.statusCode, 401);
  t.match(foreign.json(), { error: 'invalid_access_token', message: /another application/ });
  const garbage = await post('/api/auth/partner-token', { accessToken: 'not-a-token-the-provider-issued' });
  t.equal(garbage.statusCode, 401);
  t.match(garbage.json(), { error: 'invalid_access_token' });
});

t.test('private_key_jwt client authentication at the token endpoint', async (t) => {
  const keyed = await buildTestApp(t, databaseUrl, {
    PARTNER_ISSUER: op.issuer,
    PARTNER_CLIENT_ID: 'platform-web-pkjwt',
    PARTNER_CLIENT_PRIVATE_KEY: JSON.stringify(clientJwk),
    PARTNER_REDIRECT_URIS: WEB_REDIRECT,
  });
  const res = await keyed.app.inject({
    method: 'POST',
    url: '/api/auth/partner',
    payload: { ...(await authorize('alice-sub', 'platform-web-pkjwt')), redirectUri: WEB_REDIRECT },
  });
  t.equal(res.statusCode, 200, res.body);
  t.match(res.json(), { user: { email: 'alice@example.com' } });
  const token = op.requests.filter((r) => r.path === '/token').at(-1)!;
  t.match(token.body, /client_assertion_type=urn%3Aietf%3Aparams%3Aoauth%3Aclient-assertion-type%3Ajwt-bearer/);
});

t.test('no code, token or refresh token in the log', async (t) => {
  const grant = await authorize('alice-sub');
  const res = await post('/api/auth/partner', { ...grant, redirectUri: WEB_REDIRECT });
  t.equal(res.statusCode, 200);
  const log = logs();
  t.ok(log.length > 0, 'something was logged');
  for (const secret of [grant.code, grant.codeVerifier, res.json().token, res.json().refreshToken])
    t.notOk(log.includes(secret));
});

t.test(
  'the 61st external login attempt from one address in 15 minutes is 429, across these routes; password logins count apart',
  async (t) => {
    const from = '10.99.0.1';
    const attempts = [
      () => post('/api/auth/partner', { code: 'bad', codeVerifier: 'a'.repeat(43), redirectUri: WEB_REDIRECT }, from),
      () => post('/api/auth/partner-ios', { idToken: 'a.b.c', nonce: 'n' }, from),
      () => post('/api/auth/partner-token', { accessToken: 'nope' }, from),
    ];
    for (let i = 0; i < 60; i++) {
      const res = await attempts[i % attempts.length]!();
      if (res.statusCode === 429) t.fail(`attempt ${i + 1} refused`);
    }
    const next = await post('/api/auth/partner-token', { accessToken: 'nope' }, from);
    t.equal(next.statusCode, 429);
    t.match(next.json(), { error: 'rate_limited' });
    const password = await app.inject({
      method: 'POST',
      url: '/api/auth/login',
      payload: { email: 'x@example.com', password: 'wrong' },
      remoteAddress: from,
    });
    t.equal(password.statusCode, 401, 'a password login from that address is checked on its own budget');
  },
);
