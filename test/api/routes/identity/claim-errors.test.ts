// Every refusal of POST /agent/identity/claim and /claim/complete, with its
// status, in the identity provider's {code, message} shape.
import type { LightMyRequestResponse } from 'fastify';
import t, { type Test } from 'tap';
import { z } from 'zod';
import { createUser } from '../../../../core/accounts/users.ts';
import { sql } from '../../../../core/db/pool.ts';
import { buildTestApp } from '../../../helpers/app.ts';
import { createTestDatabase } from '../../../helpers/db.ts';
import { agent, Browser, confirmedClaim, pagePath, PASSWORD, register } from './claim-flow.ts';
import { markClaimed } from '../../../helpers/fixtures.ts';

const databaseUrl = await createTestDatabase(t);
const { app, db } = await buildTestApp(t, databaseUrl);
const { claim, complete } = agent(app);
await createUser(db, { email: 'ada@example.test', password: PASSWORD });

const attempts = () =>
  db.oneFirst(sql.type(z.object({ n: z.number() }))`select count(*)::int as n from agent_claim_attempts`);
const guesses = () =>
  db.oneFirst(sql.type(z.object({ n: z.number() }))`
  select coalesce(sum(hits), 0)::int as n from rate_limit_windows where bucket = 'user-code-guesses'`);
const failedCodes = () =>
  db.oneFirst(
    sql.type(z.object({ n: z.number() }))`select coalesce(sum(failed_codes), 0)::int as n from agent_claim_attempts`,
  );

function refused(t: Test, res: LightMyRequestResponse, status: number, code: string) {
  t.equal(res.statusCode, status, `${code}: ${res.body}`);
  t.match(res.json(), { code, message: String });
  t.same(
    Object.keys(res.json()).filter((k) => k !== 'retry_after'),
    ['code', 'message'],
    'the identity error shape',
  );
}

t.test('invalid_request: malformed bodies are 400 and store nothing', async (t) => {
  const reg = await register(db, 'service_auth', 'ada@example.test');
  const before = { attempts: await attempts(), failed: await failedCodes() };
  const post = (url: string, payload: unknown) =>
    app.inject({
      method: 'POST',
      url,
      payload: typeof payload === 'string' ? payload : JSON.stringify(payload),
      headers: { 'content-type': 'application/json' },
    });
  for (const body of [
    {},
    '{',
    { type: 'anonymous', claim_token: reg.claimToken, login_hint: 'ada@example.test' },
    { type: 'service_auth', claim_token: 7, login_hint: 'ada@example.test' },
    { type: 'service_auth', claim_token: '', login_hint: 'ada@example.test' },
    { type: 'service_auth', claim_token: reg.claimToken },
  ]) {
    refused(t, await post('/agent/identity/claim', body), 400, 'invalid_request');
  }
  for (const body of [
    {},
    '{"claim_token":',
    { claim_token: reg.claimToken },
    { claim_token: reg.claimToken, user_code: '' },
    { claim_token: reg.claimToken, user_code: 12345678 },
  ]) {
    refused(t, await post('/agent/identity/claim/complete', body), 400, 'invalid_request');
  }
  t.same({ attempts: await attempts(), failed: await failedCodes() }, before, 'nothing stored');
});

t.test('invalid_claim_token, invalid_login_hint', async (t) => {
  refused(t, await claim('ct_unknown', 'ada@example.test'), 400, 'invalid_claim_token');
  refused(t, await complete('ct_unknown', 'BCDF-GHJK'), 400, 'invalid_claim_token');
  const reg = await register(db, 'service_auth', 'ada@example.test');
  refused(t, await claim(reg.claimToken, 'bob@example.test'), 400, 'invalid_login_hint');
  refused(t, await claim(reg.claimToken, 'not an e-mail'), 400, 'invalid_login_hint');
  const anon = await register(db, 'anonymous');
  refused(t, await claim(anon.claimToken, 'not-an-email'), 400, 'invalid_login_hint');
  t.equal((await claim(anon.claimToken, 'anyone@example.test')).statusCode, 200, 'anonymous: any e-mail');
});

t.test('claim_expired, claim_revoked, already_claimed', async (t) => {
  const expired = await register(db, 'service_auth', 'ada@example.test');
  await db.query(
    sql.unsafe`update agent_registrations set claim_expires_at = now() - interval '1 second' where id = ${expired.registration.id}`,
  );
  refused(t, await claim(expired.claimToken, 'ada@example.test'), 410, 'claim_expired');
  refused(t, await complete(expired.claimToken, 'BCDF-GHJK'), 410, 'claim_expired');

  const revoked = await register(db, 'service_auth', 'ada@example.test');
  await db.query(
    sql.unsafe`update agent_registrations set claim_revoked_at = now() where id = ${revoked.registration.id}`,
  );
  refused(t, await claim(revoked.claimToken, 'ada@example.test'), 410, 'claim_revoked');
  refused(t, await complete(revoked.claimToken, 'BCDF-GHJK'), 410, 'claim_revoked');
  const dead = await register(db, 'anonymous');
  await db.query(
    sql.unsafe`update agent_registrations set status = 'revoked', revoked_at = now() where id = ${dead.registration.id}`,
  );
  refused(t, await claim(dead.claimToken, 'ada@example.test'), 410, 'claim_revoked');

  const claimed = await register(db, 'anonymous');
  await markClaimed(db, claimed.registration.id);
  refused(t, await claim(claimed.claimToken, 'ada@example.test'), 409, 'already_claimed');
  refused(t, await complete(claimed.claimToken, 'BCDF-GHJK'), 409, 'already_claimed');
});

t.test('too_many_attempts: three pending attempts, then 429 until one expires', async (t) => {
  const reg = await register(db, 'service_auth', 'ada@example.test');
  const ids: string[] = [];
  for (let i = 0; i < 3; i++) {
    const res = await claim(reg.claimToken, 'ada@example.test');
    t.equal(res.statusCode, 200);
    ids.push(res.json().attempt.id);
  }
  const fourth = await claim(reg.claimToken, 'ada@example.test');
  refused(t, fourth, 429, 'too_many_attempts');
  t.ok(fourth.json().retry_after > 0 && fourth.json().retry_after <= 600, `retry_after ${fourth.json().retry_after}`);
  t.equal(fourth.headers['retry-after'], String(fourth.json().retry_after));
  await db.query(
    sql.unsafe`update agent_claim_attempts set expires_at = now() - interval '1 second' where id = ${ids[0]!}`,
  );
  t.equal((await claim(reg.claimToken, 'ada@example.test')).statusCode, 200, 'room again once one expired');
});

t.test('claim_not_confirmed does not count as a guess', async (t) => {
  const reg = await register(db, 'service_auth', 'ada@example.test');
  refused(t, await complete(reg.claimToken, 'BCDF-GHJK'), 400, 'claim_not_confirmed');
  await claim(reg.claimToken, 'ada@example.test');
  const before = await guesses();
  refused(t, await complete(reg.claimToken, 'BCDF-GHJK'), 400, 'claim_not_confirmed');
  t.equal(await guesses(), before, 'no guess counted while waiting');
  const { reg: confirmed } = await confirmedClaim(app, db, 'ada@example.test');
  refused(t, await complete(confirmed.claimToken, 'BCDF-GHJK'), 400, 'invalid_user_code');
  t.equal(await guesses(), before + 1, 'a real guess is counted');
});

t.test('five wrong codes are invalid_user_code and lock the attempt: user_code_expired', async (t) => {
  const { reg, code, attemptId } = await confirmedClaim(app, db, 'ada@example.test');
  const wrong = code.startsWith('B') ? 'CCCC-CCCC' : 'BBBB-BBBB';
  for (let i = 0; i < 5; i++) {
    const res = await complete(reg.claimToken, wrong);
    refused(t, res, 400, 'invalid_user_code');
    t.notMatch(res.body, code.replace('-', ''), 'the code is never sent to the agent');
  }
  const row = await db.one(sql.type(z.object({ status: z.string(), failed_codes: z.number() }))`
    select status, failed_codes from agent_claim_attempts where id = ${attemptId}`);
  t.same(row, { status: 'locked', failed_codes: 5 });
  refused(t, await complete(reg.claimToken, code), 410, 'user_code_expired');
  // A fresh claim gives a fresh link and code.
  const started = await claim(reg.claimToken, 'ada@example.test');
  t.equal(started.statusCode, 200);
  const browser = new Browser(app, pagePath(started));
  await browser.signIn('ada@example.test');
  const again = await browser.confirm();
  t.equal((await complete(reg.claimToken, again.code)).statusCode, 200);
});

t.test('user_code_expired: ten minutes after confirmation', async (t) => {
  const { reg, code, attemptId } = await confirmedClaim(app, db, 'ada@example.test');
  await db.query(
    sql.unsafe`update agent_claim_attempts set user_code_expires_at = now() - interval '1 second' where id = ${attemptId}`,
  );
  refused(t, await complete(reg.claimToken, code), 410, 'user_code_expired');
});

const completeFrom = (ip: string, claimToken: string, userCode: string) =>
  app.inject({
    method: 'POST',
    url: '/agent/identity/claim/complete',
    remoteAddress: ip,
    payload: { claim_token: claimToken, user_code: userCode },
  });

t.test("rate_limit_exceeded: one client guessing never blocks another client's right code", async (t) => {
  const { reg, code } = await confirmedClaim(app, db, 'ada@example.test');
  await db.query(sql.unsafe`
    insert into rate_limit_windows (bucket, key, window_start, hits) values ('user-code-guesses-client', '10.66.0.1', now(), 30)
    on conflict (bucket, key) do update set window_start = now(), hits = 30`);
  const limited = await completeFrom('10.66.0.1', reg.claimToken, code);
  refused(t, limited, 429, 'rate_limit_exceeded');
  t.match(limited.json().message, /from this client/);
  t.ok(limited.json().retry_after >= 1 && limited.json().retry_after <= 60);
  t.equal(limited.headers['retry-after'], String(limited.json().retry_after));
  t.equal(
    (await completeFrom('10.66.0.2', reg.claimToken, code)).statusCode,
    200,
    'the right code from elsewhere works',
  );
});

t.test('rate_limit_exceeded: the global circuit breaker, far above one client', async (t) => {
  // Another person: each completed claim gives its person one more organization to choose from.
  await createUser(db, { email: 'grace@example.test', password: PASSWORD });
  const { reg, code } = await confirmedClaim(app, db, 'grace@example.test');
  await db.query(sql.unsafe`
    insert into rate_limit_windows (bucket, key, window_start, hits) values ('user-code-guesses', 'global', now(), 6000)
    on conflict (bucket, key) do update set window_start = now(), hits = 6000`);
  refused(t, await completeFrom('10.66.0.3', reg.claimToken, code), 429, 'rate_limit_exceeded');
  await db.query(sql.unsafe`delete from rate_limit_windows where bucket = 'user-code-guesses'`);
  t.equal(
    (await completeFrom('10.66.0.3', reg.claimToken, code)).statusCode,
    200,
    'the right code still works afterwards',
  );
});

t.test('auth_method_disabled: claim, complete and the page', async (t) => {
  const reg = await register(db, 'service_auth', 'ada@example.test');
  const path = pagePath(await claim(reg.claimToken, 'ada@example.test'));
  const off = await buildTestApp(t, databaseUrl, { SERVICE_AUTH_REGISTRATION_DISABLED: 'true' });
  const offAgent = agent(off.app);
  refused(t, await offAgent.claim(reg.claimToken, 'ada@example.test'), 403, 'auth_method_disabled');
  refused(t, await offAgent.complete(reg.claimToken, 'BCDF-GHJK'), 403, 'auth_method_disabled');
  refused(t, await offAgent.claim('ct_unknown', 'not an e-mail'), 403, 'auth_method_disabled');
  const page = await off.app.inject({ url: path });
  t.equal(page.statusCode, 403);
  t.match(page.headers['content-type'], /^text\/html/);
});
