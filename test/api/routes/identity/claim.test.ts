// The claim ceremony end to end: the agent's JSON calls and the person's page,
// driven over HTTP as a browser would. Error codes of the JSON endpoints are
// in claim-errors.test.ts.
import t from 'tap';
import { z } from 'zod';
import { createUser } from '../../../../core/accounts/users.ts';
import { sha256 } from '../../../../core/crypto/tokens.ts';
import { sql } from '../../../../core/db/pool.ts';
import { verifyAssertion } from '../../../../core/identity/tokens.ts';
import { createTenant } from '../../../../core/tenants/tenants.ts';
import { buildTestApp } from '../../../helpers/app.ts';
import { createTestDatabase } from '../../../helpers/db.ts';
import { agent, Browser, confirmedClaim, csrfOf, pagePath, PASSWORD, register } from './claim-flow.ts';

const databaseUrl = await createTestDatabase(t);
const { app, db, config } = await buildTestApp(t, databaseUrl);
const { claim, complete } = agent(app);
const ada = await createUser(db, { email: 'ada@example.test', password: PASSWORD, displayName: 'Ada' });
await createUser(db, { email: 'bob@example.test', password: PASSWORD });

const Attempt = z.object({
  status: z.string(),
  user_code_hash: z.string().nullable(),
  confirmed_by: z.string().nullable(),
  organization_id: z.string().nullable(),
});
const attemptRow = (id: string) =>
  db.one(
    sql.type(
      Attempt,
    )`select status, user_code_hash, confirmed_by, organization_id from agent_claim_attempts where id = ${id}`,
  );
const UUID = '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}';

t.test('service_auth: claim -> sign-in -> confirm -> complete binds the workspace to the person', async (t) => {
  const reg = await register(db, 'service_auth', 'Ada@Example.test');
  t.equal(reg.refreshToken, null, 'no refresh token before the claim');
  const started = await claim(reg.claimToken, 'ada@EXAMPLE.test');
  t.equal(started.statusCode, 200);
  const { attempt } = started.json();
  t.match(
    attempt.verification_uri,
    new RegExp(`^${config.authUrl}/agent/identity/claim/verify/${UUID}$`),
    'an identifier, no credential',
  );
  t.match(attempt, { id: attempt.verification_uri.split('/').pop(), expires_in: 600, interval: 5 });

  const browser = new Browser(app, pagePath(started));
  const signInPage = await browser.get();
  t.equal(signInPage.statusCode, 200);
  t.match(signInPage.headers['content-type'], /^text\/html/);
  t.equal(signInPage.headers['cache-control'], 'no-store');
  t.match(
    signInPage.headers['content-security-policy'],
    /default-src 'none'.*form-action 'self'.*frame-ancestors 'none'/,
  );
  t.match(
    String(signInPage.headers['set-cookie']),
    /^claim_session=[^;]+; Path=\/agent\/identity\/claim; Max-Age=900; HttpOnly; SameSite=Strict$/,
  );
  t.match(signInPage.body, /name="password"/);
  t.notMatch(signInPage.body, /value="confirm"/, 'nothing to confirm before sign-in');

  t.equal((await complete(reg.claimToken, 'BCDF-GHJK')).json().code, 'claim_not_confirmed', 'the agent waits');

  const signedIn = await browser.post({
    action: 'signin',
    csrf: csrfOf(signInPage),
    email: 'ADA@example.test',
    password: PASSWORD,
  });
  t.equal(signedIn.statusCode, 303);
  t.equal(signedIn.headers.location, browser.path, 'back to the page, nothing in the URL');
  const decision = await browser.get();
  t.equal(decision.statusCode, 200);
  t.match(decision.body, `registration ${reg.registration.id}`);
  t.match(decision.body, /Agent workspace/);
  t.match(decision.body, /ada@example\.test|Ada@Example\.test/);
  t.match(decision.body, /value="confirm"/);
  t.match(decision.body, /value="deny"/);
  t.notMatch(decision.body, /type="radio"/, 'no organizations, no choice');

  const { res: confirmed, code } = await browser.confirm();
  t.equal(confirmed.statusCode, 200);
  t.match(code, /^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$/);
  const row = await attemptRow(attempt.id);
  t.match(
    row,
    { status: 'confirmed', confirmed_by: ada.id, user_code_hash: sha256(code.replace('-', '')) },
    'only the hash is stored',
  );
  t.notMatch((await browser.get()).body, code, 'the code is shown once');

  const done = await complete(reg.claimToken, ` ${code.toLowerCase().replace('-', ' - ')} `);
  t.equal(done.statusCode, 200, done.body);
  t.equal(done.headers['cache-control'], 'no-store');
  const body = done.json();
  t.match(body, {
    registration: { id: reg.registration.id, type: 'service_auth', claim_state: 'claimed' },
    identity: { assertion_expires_in: config.identity.assertionTtlS },
  });
  t.notMatch(done.body, code.replace('-', ''), 'the code never goes back to the agent');
  const claims = await verifyAssertion(app.idpKeys, body.identity.assertion, config.authUrl);
  t.same(claims, { registrationId: reg.registration.id, principalId: reg.registration.principal_id });

  const role = await db.maybeOneFirst(sql.type(z.object({ role: z.string() }))`
    select role from tenant_memberships where tenant_id = ${reg.registration.tenant_id} and user_id = ${ada.id}`);
  t.equal(role, 'admin', 'the person is Admin of the kept workspace');
  const claimed = await db.one(sql.type(
    z.object({ claim_state: z.string(), claimed_by: z.string(), tenant_id: z.string() }),
  )`
    select claim_state, claimed_by, tenant_id from agent_registrations where id = ${reg.registration.id}`);
  t.same(
    claimed,
    { claim_state: 'claimed', claimed_by: ada.id, tenant_id: reg.registration.tenant_id },
    'same workspace',
  );
  t.equal((await attemptRow(attempt.id)).status, 'completed');

  const refreshed = await app.inject({
    method: 'POST',
    url: '/agent/identity',
    payload: { type: 'refresh', refresh_token: body.identity.refresh_token.value },
  });
  t.equal(refreshed.statusCode, 200, 'the refresh token works');

  const again = await complete(reg.claimToken, code);
  t.equal(again.statusCode, 409);
  t.same(again.json().code, 'already_claimed', 'the identity is returned once');
  t.equal((await browser.get()).statusCode, 410, 'the page is closed');
});

t.test('anonymous: claim with any e-mail; the refresh token is rotated', async (t) => {
  const { reg, code } = await confirmedClaim(app, db, 'bob@example.test', { type: 'anonymous' });
  const done = await complete(reg.claimToken, code.replace('-', '').toLowerCase());
  t.equal(done.statusCode, 200, done.body);
  t.match(done.json().registration, { type: 'anonymous', claim_state: 'claimed' });
  t.not(done.json().identity.refresh_token.value, reg.refreshToken, 'a fresh refresh token');
  const old = await app.inject({
    method: 'POST',
    url: '/agent/identity',
    payload: { type: 'refresh', refresh_token: reg.refreshToken },
  });
  t.equal(old.json().code, 'invalid_refresh_token', 'the pre-claim token is rotated out');
});

t.test('a claim never binds silently to another account', async (t) => {
  const reg = await register(db, 'service_auth', 'ada@example.test');
  const browser = new Browser(app, pagePath(await claim(reg.claimToken, 'ada@example.test')));
  const wrong = await browser.signIn('bob@example.test');
  t.equal(wrong.statusCode, 403);
  t.match(wrong.body, 'This claim is for ada@example.test; sign in as that account.');
  t.notMatch((await browser.get()).body, /value="confirm"/, 'still signed out');

  // Bob signed in on his own claim: the cookie reaches Ada's page too, which refuses him.
  const bobs = await register(db, 'service_auth', 'bob@example.test');
  const bobBrowser = new Browser(app, pagePath(await claim(bobs.claimToken, 'bob@example.test')));
  t.equal((await bobBrowser.signIn('bob@example.test')).statusCode, 303);
  bobBrowser.path = browser.path;
  const refused = await bobBrowser.get();
  t.equal(refused.statusCode, 403);
  t.match(refused.body, /signed in as bob@example\.test\. This claim is for ada@example\.test/);
  const forced = await bobBrowser.post({ action: 'confirm', csrf: csrfOf(refused) });
  t.equal(forced.statusCode, 403, 'confirm with a valid form as the wrong person');
  t.equal((await attemptRow(browser.path.split('/').pop()!)).status, 'open');
});

t.test('CSRF: a missing, wrong or foreign token is 403 and changes nothing', async (t) => {
  const reg = await register(db, 'service_auth', 'ada@example.test');
  const browser = new Browser(app, pagePath(await claim(reg.claimToken, 'ada@example.test')));
  const other = pagePath(await claim(reg.claimToken, 'ada@example.test'));
  const page = await browser.get();
  const form = { action: 'signin', email: 'ada@example.test', password: PASSWORD };
  t.equal((await browser.post(form)).statusCode, 403, 'missing');
  t.equal((await browser.post({ ...form, csrf: 'x'.repeat(43) })).statusCode, 403, 'wrong');
  const foreign = await browser.get(other);
  t.equal((await browser.post({ ...form, csrf: csrfOf(foreign) })).statusCode, 403, 'another attempt');
  const twice = await app.inject({
    method: 'POST',
    url: browser.path,
    headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: browser.cookie },
    payload: 'action=a&action=b',
  });
  t.equal(twice.statusCode, 400, 'a malformed form');
  t.match(twice.headers['content-type'], /^text\/html/, 'answered with a page');
  const cookieless = new Browser(app, browser.path);
  t.equal((await cookieless.post({ ...form, csrf: csrfOf(page) })).statusCode, 403, 'no session');

  const stale = csrfOf(await browser.get());
  t.equal((await browser.post({ ...form, csrf: stale })).statusCode, 303);
  const refused = await browser.post({ action: 'confirm', csrf: stale });
  t.equal(refused.statusCode, 403, 'the pre-sign-in token dies with the session it belonged to');
  t.match(refused.body, /Form expired/);
  t.equal((await attemptRow(browser.path.split('/').pop()!)).status, 'open');
});

t.test('wrong passwords on the page lock the account like /api/auth/login', async (t) => {
  const email = 'guessed@example.test';
  await createUser(db, { email, password: PASSWORD });
  const reg = await register(db, 'service_auth', email);
  const browser = new Browser(app, pagePath(await claim(reg.claimToken, email)));
  for (let i = 0; i < config.loginThrottle.perAccount; i++)
    t.equal((await browser.signIn(email, 'wrong password!')).statusCode, 401);
  const limited = await browser.signIn(email);
  t.equal(limited.statusCode, 429);
  t.ok(Number(limited.headers['retry-after']) > 0);
});

t.test('deny: the attempt is denied and the claim revoked', async (t) => {
  const reg = await register(db, 'service_auth', 'ada@example.test');
  const started = await claim(reg.claimToken, 'ada@example.test');
  const browser = new Browser(app, pagePath(started));
  await browser.signIn('ada@example.test');
  const denied = await browser.press('deny');
  t.equal(denied.statusCode, 200);
  t.match(denied.body, /Claim denied/);
  t.equal((await attemptRow(started.json().attempt.id)).status, 'denied');
  t.match((await complete(reg.claimToken, 'BCDF-GHJK')).json(), { code: 'claim_denied' });
  t.equal((await claim(reg.claimToken, 'ada@example.test')).json().code, 'claim_revoked');
  t.equal((await browser.get()).statusCode, 410);
});

t.test(
  'organizations: chosen before the code; none picked -> selection required; a pick that went away -> stale',
  async (t) => {
    const carol = await createUser(db, { email: 'carol@example.test', password: PASSWORD });
    // Confirmed while carol had no organization: no choice, a code at once.
    const first = await confirmedClaim(app, db, 'carol@example.test');
    const north = await createTenant(db, carol.id, 'North <Org>');
    const south = await createTenant(db, carol.id, 'South');

    // With several organizations the choice comes first; Confirm without one hands out no code.
    const reg = await register(db, 'service_auth', 'carol@example.test');
    const started = await claim(reg.claimToken, 'carol@example.test');
    const browser = new Browser(app, pagePath(started));
    await browser.signIn('carol@example.test');
    const page0 = await browser.get();
    t.match(
      page0.body,
      /Step 1: choose the organization[\s\S]*type="radio" name="organization_id"[^>]* required[\s\S]*Step 2: confirm/,
      'the organization step first',
    );
    const unchosen = await browser.confirm();
    t.equal(unchosen.res.statusCode, 400);
    t.equal(unchosen.code, '', 'no code before an organization is chosen');
    t.match(
      unchosen.res.body,
      /class="error">Choose an organization first\. The agent will act inside the organization you choose/,
    );
    t.match(unchosen.res.body, /type="radio" name="organization_id"/, 'the form again, with the choice');
    t.equal((await attemptRow(started.json().attempt.id)).status, 'open');
    const chosen = await browser.confirm({ organization_id: north.id });
    t.ok(chosen.code, 'the code once chosen');
    t.equal((await complete(reg.claimToken, chosen.code)).statusCode, 200);

    t.equal((await complete(first.reg.claimToken, first.code)).json().code, 'organization_selection_required');
    const page = await first.browser.get();
    t.match(page.body, /type="radio" name="organization_id"/, 'the page offers the choice again');
    t.match(page.body, 'North &lt;Org&gt;', 'names are escaped');
    t.notMatch(page.body, '<Org>');
    const bogus = await first.browser.press('organization', { organization_id: first.reg.registration.tenant_id });
    t.equal(bogus.statusCode, 400, 'the workspace itself is no organization to pick');
    t.equal((await first.browser.press('organization', { organization_id: south.id })).statusCode, 303);
    const done = await complete(first.reg.claimToken, first.code);
    t.equal(done.statusCode, 200, done.body);
    const org = await db.oneFirst(sql.type(z.object({ organization_id: z.string().nullable() }))`
    select organization_id from agent_registrations where id = ${first.reg.registration.id}`);
    t.equal(org, south.id);

    const second = await confirmedClaim(app, db, 'carol@example.test', { organization: north.id });
    t.equal((await attemptRow(second.attemptId)).organization_id, north.id);
    await db.query(sql.unsafe`delete from tenant_memberships where tenant_id = ${north.id} and user_id = ${carol.id}`);
    const stale = await complete(second.reg.claimToken, second.code);
    t.equal(stale.statusCode, 409);
    t.equal(stale.json().code, 'stale_organization_selection');
    t.equal((await second.browser.press('organization', { organization_id: south.id })).statusCode, 303);
    t.equal((await complete(second.reg.claimToken, second.code)).statusCode, 200, 'after re-selecting');

    const west = await createTenant(db, carol.id, 'West');
    const third = await confirmedClaim(app, db, 'carol@example.test', { organization: west.id });
    await db.query(sql.unsafe`delete from tenants where id = ${west.id}`);
    t.equal(
      (await complete(third.reg.claimToken, third.code)).json().code,
      'stale_organization_selection',
      'a picked organization deleted since is stale too',
    );
  },
);

t.test('no URL the service produces carries a credential; the page escapes and is not cacheable', async (t) => {
  const { reg, started, browser, code } = await confirmedClaim(app, db, 'ada@example.test');
  const secrets = [reg.claimToken, PASSWORD, code];
  const page = await browser.get();
  const urls = [
    started.json().attempt.verification_uri,
    ...[...page.body.matchAll(/(?:href|action)="([^"]*)"/g)].map((m) => m[1]!),
  ];
  t.ok(urls.length > 1);
  for (const url of urls) {
    // The shared header and footer link home and to the API reference; everything else is the claim's own page.
    if (url === '/' || url === '/docs') continue;
    t.match(new URL(url, config.authUrl).pathname, new RegExp(`^/agent/identity/claim/verify/${UUID}$`), url);
    t.equal(new URL(url, config.authUrl).search, '', 'no query string');
    for (const s of secrets) t.notMatch(url, s);
  }
  t.notMatch(page.body, reg.claimToken);
  t.equal((await app.inject({ method: 'GET', url: '/agent/identity/claim/verify/not-a-uuid' })).statusCode, 404);
  const unknown = await app.inject({
    method: 'GET',
    url: '/agent/identity/claim/verify/00000000-0000-4000-8000-000000000000',
  });
  t.equal(unknown.statusCode, 404);
  t.match(unknown.headers['content-type'], /^text\/html/);
  await db.query(
    sql.unsafe`update agent_claim_attempts set expires_at = now() - interval '1 second' where status = 'open'`,
  );
  const expired = new Browser(
    app,
    pagePath(await claim((await register(db, 'anonymous')).claimToken, 'x@example.test')),
  );
  await db.query(
    sql.unsafe`update agent_claim_attempts set expires_at = now() - interval '1 second' where status = 'open'`,
  );
  t.equal((await expired.get()).statusCode, 410, 'an expired attempt');
  const doc = (await app.inject({ url: '/openapi.json' })).json();
  t.equal(doc.paths['/agent/identity/claim']?.post?.operationId, 'startAgentClaim');
  t.equal(doc.paths['/agent/identity/claim/complete']?.post?.operationId, 'completeAgentClaim');
});
