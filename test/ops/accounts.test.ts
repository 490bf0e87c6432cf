// `npm run user:create` / `operator:create`: how people get accounts; `login:unlock`: how they get back in.
import t from 'tap';
import { buildTestApp } from '../helpers/app.ts';
import { testEnv } from '../helpers/config.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { spawnEntry } from '../helpers/worker.ts';

const databaseUrl = await createTestDatabase(t);
const env = testEnv(databaseUrl);
const { app } = await buildTestApp(t, databaseUrl);

t.test('a user created with a piped password can log in', async (t) => {
  const p = spawnEntry(t, 'ops/accounts.ts', env, {
    args: ['--email', 'grace@example.test', '--name', 'Grace'],
    stdin: 'a long enough password\n',
  });
  t.equal(await p.exited, 0, p.output());
  t.match(p.output(), /created user grace@example\.test/);
  t.notMatch(p.output(), /a long enough password/, 'a piped password is not echoed');
  const login = await app.inject({
    method: 'POST',
    url: '/api/auth/login',
    payload: { email: 'grace@example.test', password: 'a long enough password' },
  });
  t.equal(login.statusCode, 200);
  const me = await app.inject({ url: '/api/auth/me', headers: { authorization: `Bearer ${login.json().token}` } });
  t.same(me.json().roles, []);
});

t.test('the operator command creates the global Admin, or promotes an existing user', async (t) => {
  const p = spawnEntry(t, 'ops/accounts.ts', env, {
    args: ['--operator', '--email', 'grace@example.test'],
    stdin: 'ignored password here',
  });
  t.equal(await p.exited, 0, p.output());
  t.match(p.output(), /now the platform operator/);
  const login = await app.inject({
    method: 'POST',
    url: '/api/auth/login',
    payload: { email: 'grace@example.test', password: 'a long enough password' },
  });
  const me = await app.inject({ url: '/api/auth/me', headers: { authorization: `Bearer ${login.json().token}` } });
  t.same(me.json().roles, ['operator']);
});

t.test('bad arguments are refused clearly', async (t) => {
  const noEmail = spawnEntry(t, 'ops/accounts.ts', env, { stdin: 'a long enough password' });
  t.equal(await noEmail.exited, 2, 'a usage error');
  t.match(noEmail.output(), /--email must be an e-mail address\n\nusage: node (--import tsx )?ops\/accounts\.[jt]s/); // as node started it
  const short = spawnEntry(t, 'ops/accounts.ts', env, { args: ['--email', 'x@example.test'], stdin: 'short' });
  t.equal(await short.exited, 1);
  t.match(short.output(), /piped password has 5 characters; it must have 10 to 200/);
  // A script with nothing on stdin (not a terminal, empty): a generated password, printed once.
  const empty = spawnEntry(t, 'ops/accounts.ts', env, { args: ['--email', 'nopipe@example.test'], stdin: '' });
  t.equal(await empty.exited, 0, empty.output());
  const generated = /password \(shown once\): (\S+)/.exec(empty.output())?.[1];
  t.ok(generated && generated.length >= 20, 'the generated password is printed');
  const login = await app.inject({
    method: 'POST',
    url: '/api/auth/login',
    payload: { email: 'nopipe@example.test', password: generated },
  });
  t.equal(login.statusCode, 200, 'and it logs in');
  const taken = spawnEntry(t, 'ops/accounts.ts', env, {
    args: ['--email', 'GRACE@example.test'],
    stdin: 'another long password',
  });
  t.equal(await taken.exited, 1);
  t.match(taken.output(), /already exists/);
});

t.test('license:create prints a key once that logs in to the dashboard', async (t) => {
  const p = spawnEntry(t, 'ops/licenses.ts', env, { args: ['--email', 'buyer@example.test', '--plan', 'enterprise'] });
  t.equal(await p.exited, 0, p.output());
  const key = /license key \(shown once\): (lic_\S+)/.exec(p.output())?.[1];
  t.ok(key, 'key printed');
  const login = await app.inject({ method: 'POST', url: '/api/dashboard/auth/login', payload: { licenseKey: key } });
  t.equal(login.statusCode, 200);
  const me = await app.inject({
    url: '/api/dashboard/auth/me',
    headers: { authorization: `Bearer ${login.json().token}` },
  });
  t.match(me.json(), { plan: 'enterprise', purchaserEmail: 'buyer@example.test' });
  const bad = spawnEntry(t, 'ops/licenses.ts', env, { args: ['--email', 'buyer@example.test', '--plan', 'gold'] });
  t.equal(await bad.exited, 2, 'a usage error');
  t.match(bad.output(), /--plan must be one of pro, enterprise/);
});

t.test('keys:rotate makes a new signing key and keeps the old one published', async (t) => {
  const before = (await app.inject('/.well-known/jwks.json')).json().keys.length;
  const p = spawnEntry(t, 'ops/rotate-keys.ts', env);
  t.equal(await p.exited, 0, p.output());
  const kid = /new signing key (\S+);/.exec(p.output())?.[1];
  const after = (await app.inject('/.well-known/jwks.json')).json().keys as Array<{ kid: string }>;
  t.equal(after.length, Math.max(before, 1) + 1);
  t.ok(after.some((k) => k.kid === kid));
});

t.test('login:unlock lifts an account lockout and an address lockout', async (t) => {
  const { perAccount } = app.config.loginThrottle;
  const login = (password: string, remoteAddress: string) =>
    app.inject({
      method: 'POST',
      url: '/api/auth/login',
      payload: { email: 'grace@example.test', password },
      remoteAddress,
    });
  for (let i = 0; i < perAccount; i++) await login('a wrong guess', `10.31.0.${i + 1}`);
  t.equal((await login('a long enough password', '10.31.1.1')).statusCode, 429, 'locked');

  // LOG_LEVEL unset, as a person runs it: the sentence is the whole output.
  const { LOG_LEVEL: _, ...personEnv } = env;
  const unlock = spawnEntry(t, 'ops/login-unlock.ts', personEnv, { args: ['--email', 'Grace@example.test'] });
  t.equal(await unlock.exited, 0, unlock.output());
  t.equal(
    unlock.output(),
    'cleared the failed logins of account Grace@example.test; the next login is checked afresh\n',
  );
  t.equal((await login('a long enough password', '10.31.1.1')).statusCode, 200, 'in again');

  const again = spawnEntry(t, 'ops/login-unlock.ts', env, { args: ['--address', '10.31.0.1'] });
  t.equal(await again.exited, 0, again.output());
  t.match(again.output(), /cleared the failed logins of address 10\.31\.0\.1/);
  const nothing = spawnEntry(t, 'ops/login-unlock.ts', env, { args: ['--address', '10.31.0.1'] });
  t.equal(await nothing.exited, 0);
  t.match(nothing.output(), /nothing to lift/);

  const bad = spawnEntry(t, 'ops/login-unlock.ts', env, { args: ['--address', 'not-an-ip'] });
  t.equal(await bad.exited, 2, 'a usage error');
  t.match(bad.output(), /--address must be an IPv4 or IPv6 address/);
});
