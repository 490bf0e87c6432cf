// The approval page behind approve_url, driven over HTTP as a browser would
// (cookie jar, CSRF token read from the form): sign-in, what an Admin sees,
// 404 for outsiders like an unknown id, 403 for a Viewer, decisions and the
// agent's retry, the shared sign-in budget.
import t from 'tap';
import type { LightMyRequestResponse } from 'fastify';
import { createUser } from '../../../../core/accounts/users.ts';
import { sql } from '../../../../core/db/pool.ts';
import { createRegistration } from '../../../../core/identity/registrations.ts';
import { buildTestApp } from '../../../helpers/app.ts';
import { createTestDatabase } from '../../../helpers/db.ts';
import { createBoardScopes, markClaimed } from '../../../helpers/fixtures.ts';
import { agentAccessToken } from '../../../helpers/principals.ts';

const PASSWORD = 'correct horse battery staple';
const databaseUrl = await createTestDatabase(t);
const { app, db, config } = await buildTestApp(t, databaseUrl);

const { registration } = await createRegistration(db, { type: 'anonymous', ip: '10.9.0.3', claimTokenTtlS: 600 });
await markClaimed(db, registration.id);
await db.query(
  sql.unsafe`update agent_principals set display_name = 'Reporter <bot>' where id = ${registration.principal_id}`,
);
const tenantId = registration.tenant_id;
const { companyId } = await createBoardScopes(db, tenantId);
const agentToken = await agentAccessToken(app, config, registration, ['svc:boards:read', 'svc:boards:publish']);
const admin = await createUser(db, { email: 'admin@example.test', password: PASSWORD });
const viewer = await createUser(db, { email: 'viewer@example.test', password: PASSWORD });
await createUser(db, { email: 'outsider@example.test', password: PASSWORD });
await db.query(
  sql.unsafe`insert into tenant_memberships (tenant_id, user_id, role) values (${tenantId}, ${admin.id}, 'admin'), (${tenantId}, ${viewer.id}, 'viewer')`,
);

let keys = 0;
const agentPost = (url: string, payload: object) =>
  app.inject({
    method: 'POST',
    url,
    payload,
    headers: { authorization: `Bearer ${agentToken}`, 'idempotency-key': `page-key-${++keys}` },
  });
async function askToPublish(title: string, content: object) {
  const created = await agentPost('/api/agent/v1/boards', {
    title,
    scope_type: 'company',
    scope_id: companyId,
    content,
  });
  const id = created.json().id as string;
  const asked = (await agentPost(`/api/agent/v1/boards/${id}/publish`, { visibility: 'public' })).json();
  return { boardId: id, approvalId: asked.approval.id as string, path: new URL(asked.approval.approve_url).pathname };
}

const csrfOf = (res: LightMyRequestResponse) => /name="csrf" value="([^"]+)"/.exec(res.body)?.[1] ?? '';
let nextIp = 1;
/** A person's browser: keeps the approval_session cookie, posts forms with the CSRF token of the page. */
class Person {
  cookie = '';
  readonly ip = `10.60.0.${nextIp++}`;
  constructor(readonly path: string) {}
  private keep(res: LightMyRequestResponse) {
    const set = res.headers['set-cookie'];
    for (const line of Array.isArray(set) ? set : set ? [set] : [])
      if (line.startsWith('approval_session=')) this.cookie = line.split(';')[0]!;
    return res;
  }
  async get(path = this.path) {
    return this.keep(
      await app.inject({ url: path, headers: this.cookie ? { cookie: this.cookie } : {}, remoteAddress: this.ip }),
    );
  }
  async post(fields: Record<string, string>, path = this.path) {
    return this.keep(
      await app.inject({
        method: 'POST',
        url: path,
        remoteAddress: this.ip,
        payload: new URLSearchParams(fields).toString(),
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          ...(this.cookie ? { cookie: this.cookie } : {}),
        },
      }),
    );
  }
  async signIn(email: string, password = PASSWORD) {
    return this.post({ action: 'signin', csrf: csrfOf(await this.get()), email, password });
  }
  async press(action: 'approve' | 'deny' | 'signout') {
    return this.post({ action, csrf: csrfOf(await this.get()) });
  }
}

t.test("an Admin signs in, sees what would be published, approves; the agent's retry publishes", async (t) => {
  const { boardId, approvalId, path } = await askToPublish('Q3 <Sales>', {
    summary: 'Strong quarter.\n\nEMEA led <b>growth</b>.',
    metrics: { revenue: 1200 },
  });
  t.equal(path, `/boards/approvals/${approvalId}`);
  const person = new Person(path);
  const first = await person.get();
  t.equal(first.statusCode, 200);
  t.match(first.headers['content-type'], /^text\/html/);
  t.equal(first.headers['cache-control'], 'no-store');
  t.match(
    String(first.headers['set-cookie']),
    /^approval_session=[^;]+; Path=\/boards\/approvals; Max-Age=900; HttpOnly; SameSite=Strict$/,
  );
  t.match(first.body, 'Sign in to review a publish request');
  t.notMatch(first.body, 'Sales', 'nothing about the board before sign-in');

  const wrong = await person.signIn('admin@example.test', 'wrong password');
  t.equal(wrong.statusCode, 401);
  t.match(wrong.body, 'E-mail or password is wrong.');
  const before = person.cookie;
  t.equal((await person.signIn('admin@example.test')).statusCode, 303);
  t.not(person.cookie, before, 'a new session id at sign-in');

  const page = await person.get();
  t.equal(page.statusCode, 200);
  t.match(page.body, '<h1>Publish this board?</h1>');
  t.match(page.body, '<dt>Board</dt><dd>Q3 &lt;Sales&gt;</dd>');
  t.match(page.body, '<dt>Version</dt><dd>1</dd>');
  t.match(page.body, 'public (anyone with the link)');
  t.match(page.body, `agent Reporter &lt;bot&gt; (<code>${registration.principal_id}</code>)`);
  t.match(page.body, /<dt>Asked at<\/dt><dd>\d{4}-\d\d-\d\d \d\d:\d\d UTC<\/dd>/);
  t.match(
    page.body,
    '<p>Strong quarter.</p><p>EMEA led &lt;b&gt;growth&lt;/b&gt;.</p>',
    'a preview as paragraphs, escaped',
  );
  t.match(page.body, /class="card-value"><span class="num">1,<wbr>200</);

  const forged = await person.post({ action: 'approve', csrf: 'not-the-token' });
  t.equal(forged.statusCode, 403);
  t.match(forged.body, 'Form expired');
  const stranger = new Person(path);
  t.equal(
    (await stranger.post({ action: 'approve', csrf: csrfOf(page) })).statusCode,
    403,
    'a token of another session',
  );

  const approved = await person.press('approve');
  t.equal(approved.statusCode, 303);
  t.equal(approved.headers.location, path);
  const after = await person.get();
  t.match(after.body, /<span class="ok">Approved<\/span> by admin@example\.test on /);
  t.notMatch(after.body, 'value="approve"', 'no buttons once decided');
  const again = await person.press('deny');
  t.equal(again.statusCode, 409);
  t.match(again.body, 'already decided (approved)');

  const published = await agentPost(`/api/agent/v1/boards/${boardId}/publish`, { visibility: 'public' });
  t.equal(published.json().state, 'published');
  t.match((await person.get()).body, 'and published.');
  const json = await app.inject({
    url: `/api/boards/approvals/${approvalId}`,
    headers: { authorization: `Bearer ${agentToken}` },
  });
  t.equal(json.statusCode, 401, 'the JSON routes stay for platform clients');
});

t.test('a Viewer gets the 403 page, an outsider the same 404 as an unknown id', async (t) => {
  const { approvalId, path } = await askToPublish('Secret plans', { text: 'classified' });
  const viewing = new Person(path);
  await viewing.signIn('viewer@example.test');
  const refused = await viewing.get();
  t.equal(refused.statusCode, 403);
  t.match(refused.body, '<h1>An Admin must decide</h1>');
  t.notMatch(refused.body, 'Secret plans');
  t.equal((await viewing.press('approve')).statusCode, 403, 'a Viewer cannot decide');

  const outside = new Person(path);
  await outside.signIn('outsider@example.test');
  const hidden = await outside.get();
  t.equal(hidden.statusCode, 404);
  t.notMatch(hidden.body, /Secret plans|classified/);
  const unknown = await outside.get('/boards/approvals/00000000-0000-4000-8000-000000000000');
  t.equal(unknown.statusCode, 404);
  const strip = (body: string) =>
    body
      .replace(/name="csrf" value="[^"]+"/, '')
      .replace(/nonce="[^"]+"/, '')
      .replace(/\/boards\/approvals\/[0-9a-f-]+/g, '');
  t.equal(strip(hidden.body), strip(unknown.body), 'the same page');
  t.equal((await outside.press('approve')).statusCode, 404);
  t.equal((await app.inject({ url: '/boards/approvals/not-an-id' })).statusCode, 404);

  // Signing out and in as an Admin in the same browser.
  t.equal((await viewing.press('signout')).statusCode, 303);
  t.match((await viewing.get()).body, 'Sign in to review a publish request');
  await viewing.signIn('admin@example.test');
  t.equal((await viewing.press('deny')).statusCode, 303);
  t.match((await viewing.get()).body, /<span class="bad">Denied<\/span> by admin@example\.test/);
  const state = await db.oneFirst(sql.unsafe`select state from board_publish_approvals where id = ${approvalId}`);
  t.equal(state, 'denied');
});

t.test('sign-in failures share the login budget of /api/auth/login', async (t) => {
  const { path } = await askToPublish('Budget', { text: 'x' });
  const person = new Person(path);
  const email = 'budget@example.test';
  await createUser(db, { email, password: PASSWORD });
  for (let i = 0; i < config.loginThrottle.perAccount; i++)
    t.equal((await person.signIn(email, 'wrong password')).statusCode, 401);
  const limited = await person.signIn(email);
  t.equal(limited.statusCode, 429);
  t.match(limited.body, /Too many wrong passwords for this account; try again in \d+ minutes/);
  t.ok(Number(limited.headers['retry-after']) > 0);
  const login = await app.inject({
    method: 'POST',
    url: '/api/auth/login',
    remoteAddress: '10.200.0.1',
    payload: { email, password: PASSWORD },
  });
  t.equal(login.statusCode, 429, 'the same account budget as /api/auth/login');
  t.equal((await new Person(path).signIn('admin@example.test')).statusCode, 303, 'another person signs in');
});

t.test('signing out ends the session on the server: a copy of the old cookie can neither see nor decide', async (t) => {
  const { approvalId, path } = await askToPublish('Signed out', { text: 'x' });
  const person = new Person(path);
  t.equal((await person.signIn('admin@example.test')).statusCode, 303);
  const copy = new Person(path);
  copy.cookie = person.cookie;
  const csrf = csrfOf(await copy.get());
  t.equal((await person.press('signout')).statusCode, 303);
  const seen = await copy.get();
  t.match(seen.body, 'Sign in to review a publish request', 'the old cookie is signed out too');
  const decided = await copy.post({ action: 'approve', csrf });
  t.not(decided.statusCode, 303);
  t.equal(
    await db.oneFirst(sql.unsafe`select state from board_publish_approvals where id = ${approvalId}`),
    'pending',
    'nothing decided',
  );
});
