// One canonical e-mail address on every sign-in surface (issue 49, item 1):
// the login budget and the account lookup see the same address. An address
// spelt with İ (U+0130), ß or a trailing dot is nobody's: refused on the API
// (400), answered as a wrong password on the forms, never signed in. The
// Kelvin sign (U+212A) and fullwidth letters are the ASCII letters: the same
// account, under the same budget, locked while it is locked.
import t from 'tap';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { liftLockout } from '../../../../core/accounts/login-throttle.ts';
import { createUser } from '../../../../core/accounts/users.ts';
import { createTenant } from '../../../../core/tenants/tenants.ts';
import { buildTestApp } from '../../../helpers/app.ts';
import { createTestDatabase } from '../../../helpers/db.ts';
import { agent, pagePath, register } from '../identity/claim-flow.ts';

const PASSWORD = 'correct horse battery staple';
const databaseUrl = await createTestDatabase(t);
const { app, db } = await buildTestApp(t, databaseUrl, { LOGIN_FAILURES_PER_ACCOUNT: '3' });

const ACCOUNT = 'kris@example.test';
const REFUSED = {
  'U+0130': 'kr\u0130s@example.test', // PostgreSQL's lower() made it kris, JavaScript's kri̇s
  ß: 'kri\u00DF@example.test',
  'trailing dot': 'kris@example.test.',
};
const SAME = {
  'U+212A': '\u212Aris@example.test', // the Kelvin sign
  fullwidth: '\uFF2B\uFF32\uFF29\uFF33@example.test',
};

await createUser(db, { email: ACCOUNT, password: PASSWORD });
const admin = await createUser(db, { email: 'admin@example.test', password: PASSWORD });
const workspace = await createTenant(db, admin.id, 'Workspace');

let ips = 1;
/** A browser on one of the form pages: keeps its cookies, reads CSRF tokens from the forms. */
class Visitor {
  cookies = new Map<string, string>();
  readonly ip = `10.49.1.${ips++}`;
  constructor(readonly api: FastifyInstance) {}
  private keep(res: LightMyRequestResponse) {
    const set = res.headers['set-cookie'];
    for (const line of Array.isArray(set) ? set : set ? [set] : []) {
      const [pair] = line.split(';');
      const at = pair!.indexOf('=');
      this.cookies.set(pair!.slice(0, at), pair!.slice(at + 1));
    }
    return res;
  }
  private get cookie() {
    return [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
  }
  async get(url: string) {
    return this.keep(await this.api.inject({ url, headers: { cookie: this.cookie }, remoteAddress: this.ip }));
  }
  async post(url: string, fields: Record<string, string>) {
    return this.keep(
      await this.api.inject({
        method: 'POST',
        url,
        remoteAddress: this.ip,
        payload: new URLSearchParams(fields).toString(),
        headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: this.cookie },
      }),
    );
  }
}
const csrfOf = (res: LightMyRequestResponse, action?: string) =>
  (action
    ? new RegExp(`name="csrf" value="([^"]+)"><input type="hidden" name="action" value="${action}"`)
    : /name="csrf" value="([^"]+)"/
  ).exec(res.body)?.[1] ?? '';

const apiLogin = (email: string, password = PASSWORD) =>
  app.inject({ method: 'POST', url: '/api/auth/login', payload: { email, password }, remoteAddress: '10.49.0.1' });

/** Signs in on each form page with this address and the right password; answers each page's status. */
async function formSignIns(email: string): Promise<Record<string, number>> {
  const consoleVisitor = new Visitor(app);
  const consolePage = await consoleVisitor.get('/console');
  const console = await consoleVisitor.post('/console/sign-in', {
    csrf: csrfOf(consolePage),
    email,
    password: PASSWORD,
    next: '/console',
  });
  const approvalPath = '/boards/approvals/00000000-0000-4000-8000-000000000000';
  const approvalVisitor = new Visitor(app);
  const approval = await approvalVisitor.post(approvalPath, {
    action: 'signin',
    csrf: csrfOf(await approvalVisitor.get(approvalPath)),
    email,
    password: PASSWORD,
  });
  const reg = await register(db, 'service_auth', ACCOUNT);
  const claimPath = pagePath(await agent(app).claim(reg.claimToken, ACCOUNT));
  const claimVisitor = new Visitor(app);
  const claim = await claimVisitor.post(claimPath, {
    action: 'signin',
    csrf: csrfOf(await claimVisitor.get(claimPath)),
    email,
    password: PASSWORD,
  });
  return { console: console.statusCode, approval: approval.statusCode, claim: claim.statusCode };
}

t.test('lock kris@example.test with wrong passwords through the API', async (t) => {
  for (let i = 0; i < 3; i++) t.equal((await apiLogin(ACCOUNT, `guess ${i}`)).statusCode, 401);
  t.equal((await apiLogin(ACCOUNT)).statusCode, 429, 'locked: the right password waits too');
});

t.test('the API refuses the ambiguous spellings and the mapped ones alike (400), and never signs in', async (t) => {
  for (const [name, email] of Object.entries({ ...REFUSED, ...SAME })) {
    const res = await apiLogin(email);
    t.equal(res.statusCode, 400, `${name}: ${res.body}`);
  }
  t.equal((await apiLogin('KRIS@Example.TEST')).statusCode, 429, 'another case: the same locked account');
});

t.test('the form pages: an ambiguous spelling is nobody, a mapped one is the locked account', async (t) => {
  for (const [name, email] of Object.entries(REFUSED)) {
    const statuses = await formSignIns(email);
    t.same(statuses, { console: 401, approval: 401, claim: 403 }, `${name}: not signed in, no password checked`);
  }
  for (const [name, email] of Object.entries(SAME)) {
    t.same(await formSignIns(email), { console: 429, approval: 429, claim: 429 }, `${name}: the account's lockout`);
  }
});

t.test('the invitation page signs in with the invited address, under the same budget', async (t) => {
  const token = (
    await app.inject({
      method: 'POST',
      url: '/api/auth/login',
      payload: { email: admin.email, password: PASSWORD },
    })
  ).json().token as string;
  const invite = (email: string) =>
    app.inject({
      method: 'POST',
      url: '/api/tenants/invitations',
      headers: { authorization: `Bearer ${token}`, 'x-tenant-id': workspace.id },
      payload: { email, role: 'member' },
    });
  for (const [name, email] of Object.entries({ ...REFUSED, ...SAME }))
    t.equal((await invite(email)).statusCode, 400, `no invitation for ${name}`);
  const created = await invite('Kris@Example.test');
  t.equal(created.statusCode, 201, created.body);
  const link = created.json().link as string;
  const visitor = new Visitor(app);
  const opened = await visitor.post('/invitations/accept', {
    action: 'open',
    csrf: csrfOf(await visitor.get('/invitations/accept'), 'open'),
    token: link.slice(link.indexOf('#') + 1),
  });
  t.equal(opened.statusCode, 303);
  const signIn = async () =>
    visitor.post('/invitations/accept', {
      action: 'signin',
      csrf: csrfOf(await visitor.get('/invitations/accept'), 'signin'),
      password: PASSWORD,
    });
  t.equal((await signIn()).statusCode, 429, 'the account is locked, whichever case the invitation has');
  await liftLockout(db, { email: ACCOUNT });
  t.equal((await signIn()).statusCode, 303, 'and signs in once the lockout is lifted');
});

t.test('the dashboard second factor: refused spellings are 400, another case shares the budget', async (t) => {
  const totp = (email: string) =>
    app.inject({
      method: 'POST',
      url: '/api/dashboard/auth/totp-login',
      payload: { email, code: '000000' },
      remoteAddress: '10.49.0.2',
    });
  for (const [name, email] of Object.entries({ ...REFUSED, ...SAME }))
    t.equal((await totp(email)).statusCode, 400, name);
  for (let i = 0; i < 3; i++) t.equal((await totp(ACCOUNT)).statusCode, 401);
  t.equal((await totp('KRIS@EXAMPLE.TEST')).statusCode, 429, 'locked, in any case');
});

t.test('once the lockout is lifted, the mapped spellings sign in to the account, the refused ones never', async (t) => {
  await liftLockout(db, { email: ACCOUNT });
  for (const [name, email] of Object.entries(SAME))
    t.same(await formSignIns(email), { console: 303, approval: 303, claim: 303 }, name);
  for (const [name, email] of Object.entries(REFUSED))
    t.same(await formSignIns(email), { console: 401, approval: 401, claim: 403 }, name);
});
