// Login, renewal, profile, account deletion and the login budget (failures per account and per address).
import { Writable } from 'node:stream';
import t from 'tap';
import { z } from 'zod';
import { buildApp } from '../../../../api/app.ts';
import { accountKey } from '../../../../core/accounts/login-throttle.ts';
import { createUser } from '../../../../core/accounts/users.ts';
import { decoyHash } from '../../../../core/crypto/passwords.ts';
import { sql } from '../../../../core/db/pool.ts';
import { GroupCommitter } from '../../../../core/jobs/group-commit.ts';
import { buildTestApp } from '../../../helpers/app.ts';
import { testConfig } from '../../../helpers/config.ts';
import { createTestDatabase } from '../../../helpers/db.ts';
import { waitFor } from '../../../helpers/wait.ts';

const databaseUrl = await createTestDatabase(t);
const logs: string[] = [];
const logStream = new Writable({
  write: (chunk, _e, done) => {
    logs.push(String(chunk));
    done();
  },
});
const api = await buildTestApp(t, databaseUrl, { LOG_LEVEL: 'debug' });
const { db } = api;
// A second instance on the same database, as a second replica would be.
const replica = await buildApp(
  { config: testConfig(databaseUrl, { LOG_LEVEL: 'debug' }), db, jobEvents: api.hub, jobs: new GroupCommitter(db) },
  { logStream },
);
t.teardown(() => replica.close());
const app = replica;

const PASSWORD = 'correct horse battery staple';
const ada = await createUser(db, { email: 'ada@example.test', password: PASSWORD, displayName: 'Ada' });
let ip = 1;

async function login(email: string, password: string, remoteAddress = `10.0.0.${ip++}`) {
  return app.inject({ method: 'POST', url: '/api/auth/login', payload: { email, password }, remoteAddress });
}

t.test('login returns a JWT and a refresh token; /me shows the profile', async (t) => {
  const res = await login('ADA@example.test', PASSWORD);
  t.equal(res.statusCode, 200);
  const body = res.json();
  t.match(body, { tokenType: 'Bearer', expiresIn: 900, user: { id: ada.id, email: 'ada@example.test', name: 'Ada' } });
  const me = await app.inject({ url: '/api/auth/me', headers: { authorization: `Bearer ${body.token}` } });
  t.equal(me.statusCode, 200);
  t.same(me.json(), {
    id: ada.id,
    email: 'ada@example.test',
    name: 'Ada',
    avatarUrl: null,
    roles: [],
    memberships: [],
  });
  t.notMatch(res.body + me.body, /scrypt|password_hash/, 'no hash in responses');
});

t.test('wrong password and unknown e-mail: same answer, and the same scrypt work', async (t) => {
  const wrong = await login('ada@example.test', 'not the password');
  const unknown = await login('nobody@example.test', 'not the password');
  t.equal(wrong.statusCode, 401);
  t.equal(unknown.statusCode, 401);
  t.same(wrong.json(), unknown.json());
  t.same(wrong.json(), { error: 'invalid_credentials', status: 401, message: 'E-mail or password is wrong.' });
  // An unknown e-mail is checked against a decoy hash of the same cost as a
  // real one, so it costs one full scrypt too (compared by parameters, not by
  // the clock: timings never decide a test).
  const costOf = (hash: string) => hash.split('$').slice(0, 4).join('$');
  const real = await db.oneFirst(
    sql.type(z.object({ h: z.string() }))`select password_hash as h from users where email = 'ada@example.test'`,
  );
  t.equal(costOf(await decoyHash()), costOf(real), 'the decoy has the scheme and cost of a real hash');
});

t.test('refresh rotates; a reused refresh token revokes the family', async (t) => {
  const first = (await login('ada@example.test', PASSWORD)).json();
  const second = await app.inject({
    method: 'POST',
    url: '/api/auth/refresh',
    payload: { refreshToken: first.refreshToken },
  });
  t.equal(second.statusCode, 200);
  t.not(second.json().refreshToken, first.refreshToken, 'a new refresh token');
  const reuse = await app.inject({
    method: 'POST',
    url: '/api/auth/refresh',
    payload: { refreshToken: first.refreshToken },
  });
  t.equal(reuse.statusCode, 401);
  t.equal(reuse.json().error, 'invalid_refresh_token');
  const afterReuse = await app.inject({
    method: 'POST',
    url: '/api/auth/refresh',
    payload: { refreshToken: second.json().refreshToken },
  });
  t.equal(afterReuse.statusCode, 401, 'the rotated-to token died with its family');
});

t.test('one address, an office: 12 correct logins of 6 people in a minute all pass', async (t) => {
  const remoteAddress = '10.66.0.1';
  const people = await Promise.all(
    [0, 1, 2, 3, 4, 5].map((i) => createUser(db, { email: `office-${i}@example.test`, password: PASSWORD })),
  );
  for (let round = 0; round < 2; round++) {
    for (const person of people) {
      const res = await (round === 0 ? api.app : replica).inject({
        method: 'POST',
        url: '/api/auth/login',
        payload: { email: person.email, password: PASSWORD },
        remoteAddress,
      });
      t.equal(res.statusCode, 200, `${person.email}, login ${round + 1}`);
    }
  }
});

t.test(
  '25 wrong passwords for one account meet a 429 naming when to retry; another person at the same address logs in meanwhile',
  async (t) => {
    const remoteAddress = '10.77.0.1';
    const mallory = await createUser(db, { email: 'guessed@example.test', password: PASSWORD });
    const colleague = await createUser(db, { email: 'colleague@example.test', password: PASSWORD });
    const { perAccount } = api.config.loginThrottle;
    const statuses: number[] = [];
    for (let i = 0; i < 25; i++) {
      const target = i % 2 === 0 ? api.app : replica; // counted across replicas
      statuses.push(
        (
          await target.inject({
            method: 'POST',
            url: '/api/auth/login',
            payload: { email: mallory.email, password: `guess-${i}` },
            remoteAddress,
          })
        ).statusCode,
      );
    }
    t.same(
      statuses.slice(0, perAccount),
      Array(perAccount).fill(401),
      `the first ${perAccount} wrong passwords are checked`,
    );
    t.same(statuses.slice(perAccount), Array(25 - perAccount).fill(429), 'then the account is locked');
    const locked = await login(mallory.email, PASSWORD, remoteAddress);
    t.equal(locked.statusCode, 429, 'the right password waits too: the guesses were at this account');
    t.match(locked.json(), {
      error: 'rate_limited',
      status: 429,
      message: /^Too many wrong passwords for this account; try again in \d+ minutes \(at \d\d:\d\d UTC\)\.$/,
    });
    const retryAfter = Number(locked.headers['retry-after']);
    t.ok(retryAfter > 0 && retryAfter <= 15 * 60, `Retry-After ${retryAfter}`);
    t.equal((await login(mallory.email, PASSWORD, '10.77.0.2')).statusCode, 429, 'from any address');
    t.equal(
      (await login(colleague.email, PASSWORD, remoteAddress)).statusCode,
      200,
      'a colleague behind the same address logs in',
    );
    t.notMatch(logs.join(''), /guessed@example\.test|guess-\d/, 'neither the e-mail nor a guess is logged');
  },
);

t.test("a correct password spends nothing and clears its account's count", async (t) => {
  const remoteAddress = '10.78.0.1';
  const typo = await createUser(db, { email: 'typo@example.test', password: PASSWORD });
  const { perAccount } = api.config.loginThrottle;
  for (let round = 0; round < 3; round++) {
    for (let i = 0; i < perAccount - 1; i++)
      t.equal((await login(typo.email, 'a typo', remoteAddress)).statusCode, 401);
    t.equal((await login(typo.email, PASSWORD, remoteAddress)).statusCode, 200, `round ${round + 1}: still in`);
  }
  const counted = await db.anyFirst(
    sql.type(
      z.object({ bucket: z.string() }),
    )`select bucket from rate_limit_windows where key in (${accountKey({ kind: 'login', email: typo.email })}, ${remoteAddress})`,
  );
  t.same(counted, ['login-failures-address'], 'only the address keeps its failures');
});

t.test(
  'an address that fails across many accounts is locked; X-Forwarded-For buys nothing unless TRUST_PROXY is set',
  async (t) => {
    const strict = await buildTestApp(t, databaseUrl, { LOGIN_FAILURES_PER_ADDRESS: '6' });
    const remoteAddress = '10.88.0.1';
    const attempt = (email: string, password: string, forwarded?: string) =>
      strict.app.inject({
        method: 'POST',
        url: '/api/auth/login',
        payload: { email, password },
        remoteAddress,
        headers: forwarded ? { 'x-forwarded-for': forwarded } : {},
      });
    for (let i = 0; i < 6; i++)
      t.equal((await attempt(`stuffed-${i}@example.test`, 'leaked-password', `192.0.2.${i}`)).statusCode, 401);
    const next = await attempt('ada@example.test', PASSWORD, '192.0.2.200');
    t.equal(next.statusCode, 429, 'a spoofed header does not buy new attempts, and the address is locked');
    t.match(next.json().message, /^Too many failed sign-ins from your network address; try again in/);
    t.equal(
      (
        await strict.app.inject({
          method: 'POST',
          url: '/api/auth/login',
          payload: { email: 'ada@example.test', password: PASSWORD },
          remoteAddress: '10.88.0.2',
        })
      ).statusCode,
      200,
      'another address is not affected',
    );
    const malformed = await strict.app.inject({
      method: 'POST',
      url: '/api/auth/login',
      payload: '{',
      headers: { 'content-type': 'application/json' },
      remoteAddress,
    });
    t.equal(malformed.statusCode, 400, 'a malformed request checks no password and counts nothing');
  },
);

t.test('bad input is 400 in the platform shape; no token is 401', async (t) => {
  const bad = await login('not-an-email', 'x');
  t.equal(bad.statusCode, 400);
  t.match(bad.json(), { error: 'invalid_request', status: 400, details: [{ path: 'body.email' }] });
  t.equal((await app.inject({ url: '/api/auth/me' })).statusCode, 401);
  t.equal((await app.inject({ method: 'DELETE', url: '/api/auth/account' })).statusCode, 401);
});

t.test('deleting the account removes its data and keeps a shared tenant alive', async (t) => {
  const bob = await createUser(db, { email: 'bob@example.test', password: PASSWORD });
  const carol = await createUser(db, { email: 'carol@example.test', password: PASSWORD });
  const token = (await login('bob@example.test', PASSWORD)).json().token;
  const auth = { authorization: `Bearer ${token}` };
  const own = (
    await app.inject({ method: 'POST', url: '/api/tenants/', headers: auth, payload: { name: 'Solo' } })
  ).json().id;
  const shared = (
    await app.inject({ method: 'POST', url: '/api/tenants/', headers: auth, payload: { name: 'Shared' } })
  ).json().id;
  await db.query(
    sql.unsafe`insert into tenant_memberships (tenant_id, user_id, role) values (${shared}, ${carol.id}, 'viewer')`,
  );
  await app.inject({
    method: 'POST',
    url: '/api/tenants/sessions',
    headers: { ...auth, 'x-tenant-id': shared },
    payload: { title: 'kept' },
  });
  await app.inject({
    method: 'POST',
    url: '/api/tenants/secrets',
    headers: { ...auth, 'x-tenant-id': own },
    payload: { name: 'k', value: 'v-secret' },
  });

  const res = await app.inject({ method: 'DELETE', url: '/api/auth/account', headers: auth });
  t.equal(res.statusCode, 200);
  t.same(res.json(), { deleted: true, deletedTenants: 1 });

  const count = (q: ReturnType<typeof sql.unsafe>) => db.oneFirst(q) as Promise<number>;
  t.equal(await count(sql.unsafe`select count(*)::int from users where id = ${bob.id}`), 0, 'user gone');
  t.equal(await count(sql.unsafe`select count(*)::int from tenants where id = ${own}`), 0, 'sole tenant gone');
  t.equal(
    await count(sql.unsafe`select count(*)::int from tenant_secrets where tenant_id = ${own}`),
    0,
    'with its secrets',
  );
  t.equal(
    await count(sql.unsafe`select count(*)::int from auth_refresh_tokens where user_id = ${bob.id}`),
    0,
    'refresh tokens gone',
  );
  t.equal(
    await count(sql.unsafe`select count(*)::int from tenant_memberships where tenant_id = ${shared}`),
    1,
    'shared tenant keeps Carol',
  );
  t.equal(
    await count(sql.unsafe`select count(*)::int from chat_sessions where tenant_id = ${shared}`),
    1,
    'and its data',
  );
  // Every replica drops its cached view of the user on the deletion's NOTIFY.
  const refused = await waitFor(
    'the old token to be refused',
    async () => {
      const res = await app.inject({ url: '/api/auth/me', headers: auth });
      return res.statusCode === 401 ? res : null;
    },
    5_000,
  );
  t.equal(refused.statusCode, 401, 'the old token no longer works');
  t.ok(z.string().parse(carol.id));
});

t.test('passwords and tokens never reach the logs', async (t) => {
  const text = logs.join('');
  t.match(text, /"route":"[^"]+","status":\d{3},"ms"/, 'requests were logged');
  t.notMatch(text, new RegExp(PASSWORD));
  t.notMatch(text, /scrypt\$/);
  t.notMatch(text, /rt_[A-Za-z0-9_-]{20,}/, 'no refresh token');
  t.notMatch(text, /eyJ[A-Za-z0-9_-]{10,}\./, 'no JWT');
  t.notMatch(text, /v-secret/, 'no tenant secret value');
});
