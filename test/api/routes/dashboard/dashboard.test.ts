// Dashboard licenses: license-key login, TOTP two-factor (setup, verify,
// second-factor login, replay refusal), recovery codes, entitlements, and no
// secret in any log line. TOTP codes are computed here from the secret with
// otplib, for the previous, current and next 30 s step (the server accepts
// +-1 step), so no test waits for the clock.
import { randomUUID } from 'node:crypto';
import { generate } from 'otplib';
import t from 'tap';
import { z } from 'zod';
import { signPlatformToken } from '../../../../core/auth/platform-token.ts';
import { createLicense, type NewLicense } from '../../../../core/dashboard/licenses.ts';
import { normalizeRecoveryCode, sha256 } from '../../../../core/crypto/tokens.ts';
import { sql } from '../../../../core/db/pool.ts';
import { liftLockout } from '../../../../core/accounts/login-throttle.ts';
import { buildTestApp } from '../../../helpers/app.ts';
import { createTestDatabase } from '../../../helpers/db.ts';

const databaseUrl = await createTestDatabase(t);
// Small login budgets, so the lockouts below take few attempts.
const { app, db, config, logs } = await buildTestApp(t, databaseUrl, {
  LOG_LEVEL: 'trace',
  LOGIN_FAILURES_PER_ACCOUNT: '30',
  LOGIN_FAILURES_PER_ADDRESS: '8',
});

/** Every secret handed out during the run; none may appear in the logs. */
const secrets = new Set<string>();
const remember = (...values: string[]) => {
  for (const v of values) secrets.add(v);
};

// Failed logins are counted per address: each request comes from its own
// address unless a test pins one.
let nextIp = 0;
const freshIp = () => `10.77.${Math.floor(++nextIp / 250)}.${(nextIp % 250) + 1}`;

type Options = { token?: string; ip?: string };
const post = (url: string, body: unknown, o: Options = {}) =>
  app.inject({
    method: 'POST',
    url,
    payload: body as object,
    remoteAddress: o.ip ?? freshIp(),
    headers: o.token ? { authorization: `Bearer ${o.token}` } : {},
  });
const me = (token?: string) =>
  app.inject({ url: '/api/dashboard/auth/me', headers: token ? { authorization: `Bearer ${token}` } : {} });

const PERIOD = 30;
/**
 * The TOTP code for the step `offset` steps from now. A code of the previous
 * step is only produced early enough in the current one that the server
 * still sees it within its +-1 window.
 */
async function totpCode(secret: string, offset: -1 | 0 | 1): Promise<string> {
  const intoStep = (Date.now() / 1000) % PERIOD;
  if (offset < 0 && intoStep > PERIOD - 3) await new Promise((r) => setTimeout(r, (PERIOD - intoStep) * 1000 + 200));
  return generate({ secret, epoch: Math.floor(Date.now() / 1000) + offset * PERIOD });
}

/** A 6-digit string that is no valid code of the secret right now. */
async function wrongCode(secret: string): Promise<string> {
  const valid = new Set([await totpCode(secret, -1), await totpCode(secret, 0), await totpCode(secret, 1)]);
  for (let n = 123456; ; n++) if (!valid.has(String(n))) return String(n);
}

async function newLicense(email: string, extra: Omit<NewLicense, 'purchaserEmail'> = {}) {
  const created = await createLicense(db, { purchaserEmail: email, ...extra });
  remember(created.key, sha256(created.key));
  const login = await post('/api/dashboard/auth/login', { licenseKey: created.key });
  return { ...created, email, token: login.json().token as string };
}

/** Setup plus verify: the license has 2FA on; returns the secret and the first recovery codes. */
async function enableTotp(token: string) {
  const setup = await post('/api/dashboard/totp/setup', {}, { token });
  const { secret } = setup.json();
  const verifyCode = await totpCode(secret, -1);
  const verified = await post('/api/dashboard/totp/verify', { code: verifyCode }, { token });
  const recoveryCodes = verified.json().recoveryCodes as string[];
  remember(
    secret,
    ...recoveryCodes,
    ...recoveryCodes.map(normalizeRecoveryCode),
    ...recoveryCodes.map((c) => sha256(normalizeRecoveryCode(c))),
  );
  return { secret, recoveryCodes, verifyCode };
}

const totpLogin = (email: string, code: string, ip?: string) =>
  post('/api/dashboard/auth/totp-login', { email, code }, { ip });

t.test('login without 2FA returns a token; /me needs it and shows the entitlements', async (t) => {
  const lic = await newLicense('Owner@Example.test', {
    plan: 'enterprise',
    features: ['-priority_support', 'beta_widgets'],
  });
  const login = await post('/api/dashboard/auth/login', { licenseKey: lic.key });
  t.equal(login.statusCode, 200);
  t.match(login.json(), { tokenType: 'Bearer', expiresIn: 900, token: /^ey/ });
  t.notOk('totpRequired' in login.json());

  const res = await me(login.json().token);
  t.equal(res.statusCode, 200);
  t.same(res.json(), {
    id: lic.id,
    keyHint: lic.key.slice(-4),
    purchaserEmail: 'Owner@Example.test',
    plan: 'enterprise',
    status: 'active',
    expiresAt: null,
    twoFactorEnabled: false,
    recoveryCodesRemaining: 0,
    features: [
      'api_access',
      'audit_log',
      'beta_widgets',
      'custom_branding',
      'dashboards',
      'exports',
      'scheduled_reports',
      'sso',
    ],
  });

  const pro = await newLicense('pro@example.test');
  t.same((await me(pro.token)).json().features, ['api_access', 'dashboards', 'exports', 'scheduled_reports']);

  const missing = await me();
  t.equal(missing.statusCode, 401);
  t.match(missing.json(), { error: 'unauthorized', status: 401 });
  t.equal((await me('not.a.token')).statusCode, 401);
  // The two token kinds share a signing key but not an audience.
  const platform = await signPlatformToken(
    { userId: randomUUID() },
    config.secrets.PLATFORM_JWT_SECRET,
    config.baseUrl,
  );
  t.equal((await me(platform)).statusCode, 401, 'a platform token is no dashboard token');
  const jobs = await app.inject({
    url: `/api/jobs/${randomUUID()}`,
    headers: { authorization: `Bearer ${lic.token}` },
  });
  t.equal(jobs.statusCode, 401, 'a dashboard token is no platform token');

  const stored = await db.one(
    sql.type(
      z.object({ row: z.string() }),
    )`select row_to_json(l)::text as row from dashboard_licenses l where id = ${lic.id}`,
  );
  t.notMatch(stored.row, lic.key, 'the key itself is not stored');
  t.match(stored.row, sha256(lic.key));
});

t.test('unknown, revoked and expired keys are refused alike; their tokens stop working', async (t) => {
  const revoked = await newLicense('revoked@example.test');
  const expired = await newLicense('expired@example.test');
  await db.query(sql.unsafe`update dashboard_licenses set status = 'revoked' where id = ${revoked.id}`);
  await db.query(
    sql.unsafe`update dashboard_licenses set expires_at = now() - interval '1 minute' where id = ${expired.id}`,
  );
  const bodies = [];
  for (const licenseKey of ['lic_unknown_key_000000000000', revoked.key, expired.key]) {
    const res = await post('/api/dashboard/auth/login', { licenseKey });
    t.equal(res.statusCode, 401);
    bodies.push(res.json());
  }
  t.match(bodies[0], { error: 'invalid_license', status: 401 });
  t.same(bodies[1], bodies[0]);
  t.same(bodies[2], bodies[0]);
  t.equal((await me(revoked.token)).statusCode, 401, 'token of a revoked license');
  t.equal((await me(expired.token)).statusCode, 401, 'token of an expired license');
});

t.test('malformed bodies are 400 {error, status}', async (t) => {
  const lic = await newLicense('malformed@example.test');
  const cases: Array<[string, unknown, string?]> = [
    ['/api/dashboard/auth/login', {}],
    ['/api/dashboard/auth/login', { licenseKey: 12345678 }],
    ['/api/dashboard/auth/totp-login', { email: 'not-an-email', code: '123456' }],
    ['/api/dashboard/auth/totp-login', { email: 'a@example.test', code: '12' }],
    ['/api/dashboard/auth/totp-login', { email: 'a@example.test', code: '<script>alert(1)' }],
    ['/api/dashboard/totp/verify', { code: 'abcdef' }, lic.token],
    ['/api/dashboard/totp/recovery-codes/regenerate', {}, lic.token],
  ];
  for (const [url, body, token] of cases) {
    const res = await post(url, body, { token });
    t.equal(res.statusCode, 400, `${url} ${JSON.stringify(body)}`);
    t.match(res.json(), { error: 'invalid_request', status: 400, details: Array });
  }
  const notJson = await app.inject({
    method: 'POST',
    url: '/api/dashboard/auth/login',
    payload: '{"licenseKey":',
    headers: { 'content-type': 'application/json' },
    remoteAddress: freshIp(),
  });
  t.equal(notJson.statusCode, 400);
  t.match(notJson.json(), { status: 400 });
});

// Shared by the next two tests: a license with 2FA on.
let twoFactor: { id: string; email: string; key: string; secret: string; recoveryCodes: string[] };

t.test('setup, verify, login with a TOTP code; a replayed code is refused', async (t) => {
  const lic = await newLicense('TwoFactor@Example.test', { plan: 'pro' });
  t.equal(
    (await post('/api/dashboard/totp/verify', { code: '123456' }, { token: lic.token })).statusCode,
    409,
    'verify before setup',
  );

  const setup = await post('/api/dashboard/totp/setup', {}, { token: lic.token });
  t.equal(setup.statusCode, 200);
  const { secret, otpauthUri, qrCodeDataUrl } = setup.json();
  remember(secret);
  t.match(secret, /^[A-Z2-7]{16,}$/);
  t.match(otpauthUri, /^otpauth:\/\/totp\/.*secret=/);
  t.ok(otpauthUri.includes(secret));
  t.match(qrCodeDataUrl, /^data:image\/png;base64,/);
  t.same(
    [...Buffer.from(qrCodeDataUrl.split(',')[1], 'base64').subarray(1, 4)],
    [...Buffer.from('PNG')],
    'a PNG image',
  );
  const pending = await db.one(
    sql.type(
      z.object({ row: z.string() }),
    )`select row_to_json(l)::text as row from dashboard_licenses l where id = ${lic.id}`,
  );
  t.notMatch(pending.row, secret, 'the secret is stored encrypted');
  t.match(pending.row, /"totp_pending_secret":"v1\./);
  t.match(pending.row, /"totp_enabled_at":null/);

  const wrong = await post('/api/dashboard/totp/verify', { code: await wrongCode(secret) }, { token: lic.token });
  t.equal(wrong.statusCode, 400);
  t.match(wrong.json(), { error: 'invalid_code', status: 400 });
  t.equal((await me(lic.token)).json().twoFactorEnabled, false, 'a wrong code enables nothing');

  const enabling = await totpCode(secret, -1);
  const verified = await post('/api/dashboard/totp/verify', { code: enabling }, { token: lic.token });
  t.equal(verified.statusCode, 200);
  const { enabled, recoveryCodes } = verified.json();
  t.equal(enabled, true);
  t.equal(recoveryCodes.length, 8);
  t.equal(new Set(recoveryCodes).size, 8);
  for (const code of recoveryCodes) t.match(code, /^[A-Z2-9]{5}-[A-Z2-9]{5}$/);
  remember(
    ...recoveryCodes,
    ...recoveryCodes.map(normalizeRecoveryCode),
    ...recoveryCodes.map((c: string) => sha256(normalizeRecoveryCode(c))),
  );
  twoFactor = { id: lic.id, email: lic.email, key: lic.key, secret, recoveryCodes };

  const again = await post('/api/dashboard/totp/setup', {}, { token: lic.token });
  t.equal(again.statusCode, 409);
  t.match(again.json(), { error: 'totp_already_enabled', status: 409 });
  t.equal((await post('/api/dashboard/totp/verify', { code: enabling }, { token: lic.token })).statusCode, 409);
  t.match((await me(lic.token)).json(), { twoFactorEnabled: true, recoveryCodesRemaining: 8 });

  const login = await post('/api/dashboard/auth/login', { licenseKey: lic.key });
  t.equal(login.statusCode, 200);
  t.match(login.json(), { totpRequired: true });
  t.notOk('token' in login.json(), 'no token before the second factor');

  t.equal((await totpLogin(lic.email, enabling)).statusCode, 401, 'the code that enabled 2FA is spent');
  const code = await totpCode(secret, 0);
  const first = await totpLogin('twofactor@EXAMPLE.test', code);
  t.equal(first.statusCode, 200, 'e-mail matched case-insensitively');
  t.match(first.json(), { tokenType: 'Bearer', expiresIn: 900 });
  t.match((await me(first.json().token)).json(), { id: lic.id, twoFactorEnabled: true });

  const replay = await totpLogin(lic.email, code);
  t.equal(replay.statusCode, 401, 'the same code a second time');
  t.match(replay.json(), { error: 'invalid_code', status: 401 });

  // Two requests racing with one fresh code: the guarded update lets one in.
  const next = await totpCode(secret, 1);
  const raced = await Promise.all([totpLogin(lic.email, next), totpLogin(lic.email, next)]);
  t.same(raced.map((r) => r.statusCode).sort(), [200, 401]);
});

t.test('each recovery code works exactly once', async (t) => {
  const { email, recoveryCodes } = twoFactor;
  // Typed back with dashes, case and spacing changed: all the same code.
  const typed = (code: string, i: number) =>
    [code, code.toLowerCase(), code.replace('-', ''), ` ${code.slice(0, 5)} ${code.slice(6)} `][i % 4]!;
  for (const [i, code] of recoveryCodes.slice(0, 7).entries()) {
    const res = await totpLogin(email, typed(code, i));
    t.equal(res.statusCode, 200, `recovery code ${i + 1}`);
    t.equal((await me(res.json().token)).json().recoveryCodesRemaining, 7 - i);
  }
  const last = recoveryCodes[7]!;
  const raced = await Promise.all([totpLogin(email, last), totpLogin(email, last.toLowerCase())]);
  t.same(raced.map((r) => r.statusCode).sort(), [200, 401], 'the eighth code, sent twice at once, works once');
  for (const code of recoveryCodes) t.equal((await totpLogin(email, code)).statusCode, 401, 'a used code is refused');
  const used = await db.oneFirst(sql.type(z.object({ n: z.number() }))`
    select count(*)::int as n from dashboard_recovery_codes where license_id = ${twoFactor.id} and used_at is not null`);
  t.equal(used, 8);
});

t.test('regenerating recovery codes needs a live TOTP code and replaces them all', async (t) => {
  const lic = await newLicense('regen@example.test');
  const off = await post('/api/dashboard/totp/recovery-codes/regenerate', { code: '123456' }, { token: lic.token });
  t.equal(off.statusCode, 409, 'not before 2FA is on');
  t.match(off.json(), { error: 'totp_not_enabled' });
  const { secret, recoveryCodes: old, verifyCode } = await enableTotp(lic.token);
  const regenerate = (code: string, token: string | null = lic.token) =>
    post('/api/dashboard/totp/recovery-codes/regenerate', { code }, token ? { token } : {});

  t.equal((await regenerate(await totpCode(secret, 0), null)).statusCode, 401, 'needs the dashboard token');
  const wrong = await regenerate(await wrongCode(secret));
  t.equal(wrong.statusCode, 400);
  t.match(wrong.json(), { error: 'invalid_code', status: 400 });
  t.equal((await regenerate(old[0]!)).statusCode, 400, 'a recovery code is no TOTP code');
  t.equal((await regenerate(verifyCode)).statusCode, 400, 'the code spent on verify');
  t.match((await me(lic.token)).json(), { recoveryCodesRemaining: 8 }, 'refusals change nothing');

  const code = await totpCode(secret, 0);
  const res = await regenerate(code);
  t.equal(res.statusCode, 200);
  const fresh = res.json().recoveryCodes as string[];
  remember(...fresh, ...fresh.map(normalizeRecoveryCode), ...fresh.map((c) => sha256(normalizeRecoveryCode(c))));
  t.equal(fresh.length, 8);
  t.equal(new Set([...fresh, ...old]).size, 16, 'all new');
  t.equal((await regenerate(code)).statusCode, 400, 'the same TOTP code cannot regenerate twice');

  const hashes = await db.anyFirst(sql.type(z.object({ code_hash: z.string() }))`
    select code_hash from dashboard_recovery_codes where license_id = ${lic.id} order by code_hash`);
  t.same(hashes, fresh.map((c) => sha256(normalizeRecoveryCode(c))).sort(), 'exactly the eight new codes, hashed');

  for (const c of old) t.equal((await totpLogin(lic.email, c)).statusCode, 401, 'an old code no longer works');
  for (const c of fresh) t.equal((await totpLogin(lic.email, c)).statusCode, 200, 'a new code works');
  t.equal((await totpLogin(lic.email, fresh[3]!)).statusCode, 401, 'and only once');
});

t.test('an unknown e-mail and a wrong code get the same answer', async (t) => {
  const plain = await newLicense('no2fa@example.test');
  const { email, secret } = twoFactor;
  const answers = [
    await totpLogin('nobody@example.test', '123456'),
    await totpLogin(email, await wrongCode(secret)),
    await totpLogin(email, 'AAAAA-BBBBB'),
    await totpLogin('nobody@example.test', 'AAAAA-BBBBB'),
    await totpLogin(plain.email, '123456'),
  ];
  for (const res of answers) {
    t.equal(res.statusCode, 401);
    t.same(res.json(), answers[0]!.json());
  }
  t.match(answers[0]!.json(), { error: 'invalid_code', status: 401 });
});

t.test(
  'failed dashboard logins count against the address, wrong codes against the purchaser too; correct ones spend nothing',
  async (t) => {
    const ip = '192.0.2.44';
    for (let i = 0; i < 10; i++)
      t.equal(
        (await post('/api/dashboard/auth/login', { licenseKey: twoFactor.key }, { ip })).statusCode,
        200,
        `correct key ${i + 1}`,
      );
    for (let i = 0; i < 4; i++) {
      t.equal(
        (await post('/api/dashboard/auth/login', { licenseKey: 'lic_not_a_real_key_0000' }, { ip })).statusCode,
        401,
      );
      t.equal((await totpLogin('nobody@example.test', '123456', ip)).statusCode, 401);
    }
    const limited = await post('/api/dashboard/auth/login', { licenseKey: twoFactor.key }, { ip });
    t.equal(limited.statusCode, 429, 'eight failures lock the address');
    t.match(limited.json(), {
      error: 'rate_limited',
      status: 429,
      message: /from your network address; try again in \d+ minutes/,
    });
    t.ok(Number(limited.headers['retry-after']) > 0);
    t.equal(
      (await post('/api/dashboard/auth/login', { licenseKey: twoFactor.key })).statusCode,
      200,
      'other addresses are not affected',
    );
    await liftLockout(db, { email: twoFactor.email }); // the tests above made mistakes too
    const { perAccount } = config.loginThrottle;
    for (let i = 0; i < perAccount; i++) {
      const res = await totpLogin(twoFactor.email, '000000');
      if (res.statusCode !== 401) t.fail(`wrong code ${i + 1} answered ${res.statusCode}`);
    }
    const account = await totpLogin(twoFactor.email, '000000');
    t.equal(account.statusCode, 429, `${perAccount} wrong codes lock the purchaser's e-mail, from any address`);
    t.match(account.json().message, /^Too many wrong codes for this license; try again in/);
  },
);

t.test('no license key, TOTP secret or recovery code reaches a log line', async (t) => {
  const text = logs();
  t.match(text, /dashboard login with second factor/, 'the flows above were logged');
  t.match(text, /"route":"[^"]+","status":\d{3},"ms"/, 'requests were logged');
  t.ok(secrets.size > 40);
  for (const secret of secrets) t.notOk(text.includes(secret), 'a secret is absent from the logs');
});
