// altidp's redirect login against a real OpenID Connect provider answering
// with response_mode=form_post: start → provider → form-post callback →
// ticket → result, the refusals on the way, and the direct identity token.
import t from 'tap';
import { sql } from '../../../../core/db/pool.ts';
import { buildTestApp } from '../../../helpers/app.ts';
import { createTestDatabase, rowCount } from '../../../helpers/db.ts';
import { startOidcServer } from '../../../helpers/oidc-server.ts';

const BASE = 'http://localhost:3000';
const CALLBACK = `${BASE}/api/auth/altidp/callback`;
const SECRET = 'platform-alt-secret-0123456789abcdef';

const op = await startOidcServer(t, {
  clients: [
    {
      client_id: 'platform-alt',
      client_secret: SECRET,
      redirect_uris: [CALLBACK],
      token_endpoint_auth_method: 'client_secret_post',
    },
  ],
  accounts: [
    { sub: 'alt-alice', email: 'alice@relay.example', email_verified: true },
    { sub: 'alt-bob', email: 'bob@relay.example', email_verified: false },
  ],
});

const databaseUrl = await createTestDatabase(t);
const { app, db, logs } = await buildTestApp(t, databaseUrl, {
  ALTIDP_ISSUER: op.issuer,
  ALTIDP_CLIENT_ID: 'platform-alt',
  ALTIDP_CLIENT_SECRET: SECRET,
  ALTIDP_APP_CLIENT_IDS: 'com.example.native',
  LOG_LEVEL: 'debug',
});

let ip = 0;
const from = () => `10.2.${Math.floor(++ip / 250)}.${ip % 250}`;
const count = (table: string) => rowCount(db, table);

/** GET start as a browser: the provider URL and the binding cookie. */
async function start(query = 'mode=onboarding&next=/welcome') {
  const res = await app.inject({ url: `/api/auth/altidp/start/?${query}`, remoteAddress: from() });
  if (res.statusCode !== 302) throw new Error(`start answered ${res.statusCode}: ${res.body}`);
  const cookie = String(res.headers['set-cookie']).split(';')[0]!;
  return { location: new URL(String(res.headers.location)), cookie, setCookie: String(res.headers['set-cookie']) };
}

/** The person signs in (or declines) at the provider; its page posts this form back to us. */
async function atProvider(location: URL, outcome: { accountId: string } | { deny: true }) {
  op.next = outcome;
  const out = await op.authorize(Object.fromEntries(location.searchParams));
  if (out.kind !== 'form_post') throw new Error('expected a form_post page');
  return out;
}

const callback = (fields: Record<string, string>, cookie?: string) =>
  app.inject({
    method: 'POST',
    url: '/api/auth/altidp/callback',
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...(cookie ? { cookie } : {}) },
    payload: new URLSearchParams(fields).toString(),
    remoteAddress: from(),
  });
const result = (ticket: string) => app.inject({ method: 'POST', url: '/api/auth/altidp/result/', payload: { ticket } });

t.test('start → provider → form-post callback → ticket → result, once', async (t) => {
  const { location, cookie, setCookie } = await start();
  t.equal(location.origin, op.issuer);
  t.equal(location.searchParams.get('response_mode'), 'form_post');
  t.equal(location.searchParams.get('code_challenge_method'), 'S256');
  t.ok(location.searchParams.get('state') && location.searchParams.get('nonce'));
  t.match(setCookie, /HttpOnly; Secure; SameSite=None/);

  const form = await atProvider(location, { accountId: 'alt-alice' });
  t.equal(form.action, CALLBACK);
  const res = await callback(
    { ...form.fields, user: JSON.stringify({ name: { firstName: 'Alice', lastName: 'Relay' } }) },
    cookie,
  );
  t.equal(res.statusCode, 303, res.body);
  const back = new URL(String(res.headers.location));
  t.equal(`${back.origin}${back.pathname}`, `${BASE}/welcome`);
  t.notOk(back.search, 'nothing in the query string');
  const ticket = new URLSearchParams(back.hash.slice(1)).get('altidp_ticket')!;
  t.ok(ticket);

  const first = await result(ticket);
  t.equal(first.statusCode, 200, first.body);
  t.match(first.json(), {
    tokenType: 'Bearer',
    newUser: true,
    mode: 'onboarding',
    user: { email: 'alice@relay.example', name: 'Alice Relay' },
  });
  const me = await app.inject({ url: '/api/auth/me', headers: { authorization: `Bearer ${first.json().token}` } });
  t.equal(me.statusCode, 200);

  const second = await result(ticket);
  t.equal(second.statusCode, 400);
  t.match(second.json(), { error: 'invalid_ticket' });
  t.match((await result('alt_unknown-ticket')).json(), { error: 'invalid_ticket' });

  // The same callback again (a replayed form post): the flow is spent.
  const replay = await callback(form.fields, cookie);
  t.equal(replay.statusCode, 400);
  t.match(replay.json(), { error: 'invalid_state' });
  for (const secret of [ticket, form.fields.code!, form.fields.state!, first.json().refreshToken])
    t.notOk(logs().includes(secret), 'not in the log');
});

t.test('an expired ticket is refused with the same code', async (t) => {
  const { location, cookie } = await start('mode=signin');
  const res = await callback((await atProvider(location, { accountId: 'alt-alice' })).fields, cookie);
  const back = new URL(String(res.headers.location));
  t.equal(back.pathname, '/', 'next defaults to /');
  const ticket = new URLSearchParams(back.hash.slice(1)).get('altidp_ticket')!;
  await db.query(sql.unsafe`update external_login_tickets set expires_at = now() - interval '1 second'`);
  t.match((await result(ticket)).json(), { error: 'invalid_ticket' });
});

t.test('refusals: unknown state, another browser, declined consent, unverified e-mail, foreign next', async (t) => {
  const tickets = await count('external_login_tickets');
  const unknown = await callback({ state: 'forged-state', code: 'x' });
  t.equal(unknown.statusCode, 400);
  t.match(unknown.json(), { error: 'invalid_state' });

  const { location } = await start();
  const stolen = await callback(
    (await atProvider(location, { accountId: 'alt-alice' })).fields,
    `altidp_browser=${'A'.repeat(43)}`,
  );
  t.equal(stolen.statusCode, 400);
  t.match(stolen.json(), { error: 'invalid_state', message: /another browser/ });

  const declined = await start();
  const deniedForm = await atProvider(declined.location, { deny: true });
  t.equal(deniedForm.fields.error, 'access_denied');
  const denied = await callback(deniedForm.fields, declined.cookie);
  t.equal(denied.statusCode, 303);
  t.match(String(denied.headers.location), /\/welcome#altidp_error=access_denied$/);

  const unverified = await start();
  const res = await callback(
    (await atProvider(unverified.location, { accountId: 'alt-bob' })).fields,
    unverified.cookie,
  );
  t.match(String(res.headers.location), /#altidp_error=email_not_verified$/);
  t.equal(await count('external_login_tickets'), tickets, 'no ticket for any of these');

  for (const next of [
    'https://elsewhere.example/x',
    '//elsewhere.example/x',
    '/\\elsewhere.example',
    'javascript:alert(1)',
  ]) {
    const res = await app.inject({ url: `/api/auth/altidp/start/?next=${encodeURIComponent(next)}` });
    t.equal(res.statusCode, 400, next);
    t.match(res.json(), { error: 'invalid_next' });
  }
  const badMode = await app.inject({ url: '/api/auth/altidp/start/?mode=admin' });
  t.match(badMode.json(), { error: 'invalid_request' });
});

t.test('direct identity token: checked against the JWKS, audience, expiry and nonce', async (t) => {
  const now = Math.floor(Date.now() / 1000);
  const claims = {
    iss: op.issuer,
    sub: 'alt-carol',
    email: 'carol@relay.example',
    email_verified: 'true',
    iat: now,
    exp: now + 600,
  };
  const ok = await app.inject({
    method: 'POST',
    url: '/api/auth/altidp',
    payload: {
      identityToken: await op.sign({ ...claims, aud: 'com.example.native', nonce: 'n1' }),
      nonce: 'n1',
      name: 'Carol',
    },
    remoteAddress: from(),
  });
  t.equal(ok.statusCode, 200, ok.body);
  t.match(ok.json(), { newUser: true, user: { email: 'carol@relay.example', name: 'Carol' } });

  const again = await app.inject({
    method: 'POST',
    url: '/api/auth/altidp',
    payload: { identityToken: await op.sign({ ...claims, aud: 'platform-alt' }) },
    remoteAddress: from(),
  });
  t.match(again.json(), { newUser: false, user: { id: ok.json().user.id } });

  const refusals: Array<[string, Record<string, unknown>, string | undefined, RegExp]> = [
    ['another audience', { ...claims, aud: 'someone-else' }, undefined, /aud/],
    ['expired', { ...claims, aud: 'platform-alt', iat: now - 7200, exp: now - 3600 }, undefined, /expired/],
    ['nonce mismatch', { ...claims, aud: 'platform-alt', nonce: 'n1' }, 'n2', /nonce/],
    ['nonce withheld', { ...claims, aud: 'platform-alt', nonce: 'n1' }, undefined, /nonce/],
    ['another issuer', { ...claims, aud: 'platform-alt', iss: 'https://elsewhere.example' }, undefined, /iss/],
  ];
  for (const [what, body, nonce, message] of refusals) {
    const res = await app.inject({
      method: 'POST',
      url: '/api/auth/altidp',
      payload: { identityToken: await op.sign(body), ...(nonce ? { nonce } : {}) },
      remoteAddress: from(),
    });
    t.equal(res.statusCode, 401, what);
    t.match(res.json(), { error: 'invalid_id_token', message }, what);
  }
});
