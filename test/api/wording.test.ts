// The small words a person meets first: a JSON body sent as text/plain gets
// the hint form bodies get, a refused token says "invalid" once, the owner's
// rule names the way out, and every workspace a person creates gets the
// configured credits whichever route made it.
import t from 'tap';
import { z } from 'zod';
import { createUser } from '../../core/accounts/users.ts';
import { sql } from '../../core/db/pool.ts';
import { createTenant } from '../../core/tenants/tenants.ts';
import { buildTestApp } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/db.ts';

const PASSWORD = 'correct horse battery staple';
const CREDITS = 1_234_567;
const databaseUrl = await createTestDatabase(t);
const { app, db } = await buildTestApp(t, databaseUrl, { NEW_TENANT_CREDITS_MICROS: String(CREDITS) });

const ada = await createUser(db, { email: 'ada@wording.test', password: PASSWORD, displayName: 'Ada' });
const login = await app.inject({
  method: 'POST',
  url: '/api/auth/login',
  payload: { email: 'ada@wording.test', password: PASSWORD },
});
const token: string = login.json().token;
const auth = { authorization: `Bearer ${token}` };

t.test('a JSON body sent as text/plain gets the 415 that names the header', async (t) => {
  for (const contentType of ['text/plain', 'application/x-www-form-urlencoded']) {
    const res = await app.inject({
      method: 'POST',
      url: '/api/tenants/',
      headers: { ...auth, 'content-type': contentType },
      payload: JSON.stringify({ name: 'Plain' }),
    });
    t.equal(res.statusCode, 415, contentType);
    t.equal(res.json().error, 'unsupported_media_type');
    t.match(res.json().message, /content-type: application\/json/);
    t.notMatch(res.json().message, /received string/);
  }
});

t.test('a refused platform token is called invalid once', async (t) => {
  const res = await app.inject({ url: '/api/tenants/', headers: { authorization: 'Bearer not.a.token' } });
  t.equal(res.statusCode, 401);
  const message: string = res.json().message;
  t.equal(message.match(/invalid/gi)?.length ?? 0, 0, message);
  t.match(message, /^The platform token was refused \(malformed, or not signed by this service\)\.$/);
});

t.test("the owner's rule names the role in its title and the way out", async (t) => {
  const workspace = await createTenant(db, ada.id, 'Owned');
  const grace = await createUser(db, { email: 'grace@wording.test', password: PASSWORD, displayName: 'Grace' });
  await db.query(sql.unsafe`
    insert into tenant_memberships (tenant_id, user_id, role) values (${workspace.id}, ${grace.id}, 'admin')`);
  const graceLogin = await app.inject({
    method: 'POST',
    url: '/api/auth/login',
    payload: { email: 'grace@wording.test', password: PASSWORD },
  });
  const res = await app.inject({
    method: 'PATCH',
    url: `/api/tenants/members/${ada.id}`,
    headers: { authorization: `Bearer ${graceLogin.json().token}`, 'x-tenant-id': workspace.id },
    payload: { role: 'viewer' },
  });
  t.equal(res.statusCode, 409);
  t.equal(res.json().error, 'owner_protected');
  t.match(res.json().message, /To make them a Viewer, the owner first hands the workspace over to another Admin/);
  t.notMatch(res.json().message, /to viewer/);
});

t.test('every workspace a person creates gets NEW_TENANT_CREDITS_MICROS once', async (t) => {
  const created = await app.inject({
    method: 'POST',
    url: '/api/tenants/',
    headers: auth,
    payload: { name: 'Second' },
  });
  t.equal(created.statusCode, 201, created.body);
  const balance = await db.oneFirst(sql.type(z.object({ balance_micros: z.coerce.number() }))`
    select balance_micros from tenant_credits where tenant_id = ${created.json().id}`);
  t.equal(balance, CREDITS, 'POST /api/tenants/ grants what the setting says');
});
