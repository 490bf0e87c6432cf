// Names are one line: a workspace name, a display name (an invitation's
// new account, the altidp login's name) or the name of a company, an agent,
// a runner or a contact holding a control character (CR, LF, TAB, DEL, C1)
// or U+2028/U+2029 is refused with a 400 that says so, on every route and
// on the invitation page's form, and nothing is stored. A name stored
// before the rule cannot add lines to an invitation e-mail either.
import { randomUUID } from 'node:crypto';
import t, { type Test } from 'tap';
import { z } from 'zod';
import { sql } from '../../core/db/pool.ts';
import { invitationMessage } from '../../core/teams/mail.ts';
import { buildTestApp } from '../helpers/app.ts';
import { createTestDatabase, rowCount } from '../helpers/db.ts';
import { createMember } from '../helpers/fixtures.ts';

const databaseUrl = await createTestDatabase(t);
const { app, db } = await buildTestApp(t, databaseUrl);
const admin = await createMember(db, 'admin');
const headers = { authorization: `Bearer ${admin.token}`, 'x-tenant-id': admin.tenantId };
const FORGED = 'Acme\r\nBcc: leak@evil.test';
const SAYS = /control characters/;

/** The 400 of a name: in the platform's shape, naming the field and saying why. */
function refused(t: Test, res: { statusCode: number; json: () => any; body: string }, field: string) {
  t.equal(res.statusCode, 400, res.body);
  const body = res.json();
  t.equal(body.error, 'invalid_request', 'the platform error shape');
  t.match(body.message, SAYS, 'the message says why');
  t.ok(
    (body.details as { path: string; message: string }[]).some((d) => d.path === field && SAYS.test(d.message)),
    `the details name ${field}`,
  );
}

t.test(
  'a workspace name: CR, LF, TAB, DEL, C1 controls and U+2028/U+2029 are refused; ordinary Unicode is not',
  async (t) => {
    const before = await rowCount(db, 'tenants');
    for (const name of [
      FORGED,
      'Acme\nBcc',
      'Acme\rBcc',
      'Ac\tme',
      'Acme\u007f',
      'Acme\u0085x',
      'Acme\u2028Bcc',
      'A\u2029B',
    ]) {
      const res = await app.inject({ method: 'POST', url: '/api/tenants/', headers, payload: { name } });
      refused(t, res, 'body.name');
    }
    t.equal(await rowCount(db, 'tenants'), before, 'no workspace was made');
    const ok = await app.inject({
      method: 'POST',
      url: '/api/tenants/',
      headers,
      payload: { name: 'Zoë Ünal 山田 – Labs' },
    });
    t.equal(ok.statusCode, 201, ok.body);
    t.equal(ok.json().name, 'Zoë Ünal 山田 – Labs');
  },
);

t.test('every other route that takes a name refuses one with a line break', async (t) => {
  const routes: Array<[string, string, Record<string, unknown>, Record<string, string>]> = [
    ['POST', '/api/companies', { name: FORGED }, headers],
    ['PATCH', `/api/companies/${randomUUID()}`, { name: FORGED }, headers],
    ['POST', `/api/companies/${randomUUID()}/agents`, { name: FORGED, model: 'builtin/offline' }, headers],
    ['POST', '/api/managed-agents', { name: FORGED }, headers],
    ['POST', '/api/runners/enroll', { name: FORGED }, headers],
    ['POST', '/api/contact/', { name: FORGED, email: 'someone@example.test', message: 'Hello' }, {}],
    ['POST', '/api/auth/altidp', { identityToken: 'eyJhbGciOiJSUzI1NiJ9.e30.c2ln', name: FORGED }, {}],
    ['POST', '/api/invitations/accept', { token: 'inv_x', name: FORGED, password: 'a good long passphrase' }, {}],
  ];
  for (const [method, url, payload, h] of routes) {
    const res = await app.inject({ method: method as 'POST', url, headers: h, payload });
    t.test(`${method} ${url.replace(/[0-9a-f-]{36}/, ':id')}`, async (t) => refused(t, res, 'body.name'));
  }
});

/** A browser's cookies for the invitation page, kept across requests. */
function browser() {
  const jar = new Map<string, string>();
  const cookie = () => [...jar].map(([k, v]) => `${k}=${v}`).join('; ');
  const keep = <R extends { headers: Record<string, unknown> }>(res: R): R => {
    const set = res.headers['set-cookie'];
    for (const line of ([] as string[]).concat((set as string | string[] | undefined) ?? [])) {
      const [pair] = line.split(';');
      const [k, v] = pair!.split('=');
      if (v) jar.set(k!, v);
      else jar.delete(k!);
    }
    return res;
  };
  // The CSRF token of the form posting `action`.
  const csrfOf = (body: string, action: string) =>
    new RegExp(`name="csrf" value="([^"]+)"><input type="hidden" name="action" value="${action}">`).exec(body)?.[1] ??
    '';
  return {
    get: async () => keep(await app.inject({ url: '/invitations/accept', headers: { cookie: cookie() } })),
    post: async (form: Record<string, string>) =>
      keep(
        await app.inject({
          method: 'POST',
          url: '/invitations/accept',
          headers: { cookie: cookie(), 'content-type': 'application/x-www-form-urlencoded' },
          payload: new URLSearchParams(form).toString(),
        }),
      ),
    csrfOf,
  };
}

t.test('the invitation page refuses a name with a line break beside its form; no account is made', async (t) => {
  const invited = await app.inject({
    method: 'POST',
    url: '/api/tenants/invitations',
    headers,
    payload: { email: 'page-name@example.test', role: 'member' },
  });
  t.equal(invited.statusCode, 201, invited.body);
  const link = invited.json().link as string;
  const b = browser();
  const opened = await b.get();
  const open = await b.post({
    action: 'open',
    csrf: b.csrfOf(opened.body, 'open'),
    token: link.slice(link.indexOf('#') + 1),
  });
  t.equal(open.statusCode, 303, open.body);
  const form = await b.get();
  t.match(form.body, /Create your account/);
  const csrf = b.csrfOf(form.body, 'create');
  t.ok(csrf, 'the new-account form');
  const res = await b.post({
    action: 'create',
    csrf,
    name: 'Grace\r\nBcc: leak@evil.test',
    password: 'a good long passphrase',
    confirm: 'a good long passphrase',
  });
  t.equal(res.statusCode, 400, 'refused');
  t.match(res.body, /control characters/, 'the page says why');
  t.match(res.body, /Create your account/, 'beside the form, to try again');
  const made = await db.maybeOne(
    sql.type(z.object({ id: z.string() }))`select id from users where email = 'page-name@example.test'`,
  );
  t.equal(made, null, 'no account');
});

t.test('a name stored before the rule does not add lines to the invitation e-mail', async (t) => {
  const { subject, text } = invitationMessage({
    tenantName: FORGED,
    inviter: 'Mallory\nBcc: leak@evil.test',
    role: 'member',
    link: 'http://localhost:3000/invitations/accept#inv_x',
    expiresAt: new Date(),
  });
  t.notMatch(subject, /[\r\n]/);
  t.notOk(
    text.split('\n').some((line) => /^Bcc:/i.test(line)),
    'no line of the body starts with a forged header',
  );
  t.match(text, /workspace "Acme Bcc: leak@evil\.test"/, 'the name is flattened onto its line');
});
