// A workspace's people over HTTP: an Admin invites (one-time link, token
// hashed at rest and never logged, bounds, 409 for a member), the invitee
// accepts once (new account or signed-in; a different address is refused;
// expired, revoked and used links answer their own codes), members are
// listed, roles change and members are removed under the last-Admin and
// owner rules, the owner hands the workspace over to another Admin, a
// removed member is refused at once on another replica too,
// and every change is in the audit only Admins read.
import { randomUUID } from 'node:crypto';
import t from 'tap';
import { z } from 'zod';
import { createUser } from '../../../../core/accounts/users.ts';
import { sql } from '../../../../core/db/pool.ts';
import { createTenant } from '../../../../core/tenants/tenants.ts';
import { buildTestApp } from '../../../helpers/app.ts';
import { createTestDatabase } from '../../../helpers/db.ts';

const PASSWORD = 'correct horse battery staple';
const databaseUrl = await createTestDatabase(t);
const { app, db, logs } = await buildTestApp(t, databaseUrl, {
  LOG_LEVEL: 'debug',
  INVITATIONS_PER_DAY: '8',
  INVITATIONS_PENDING_MAX: '5',
});
const replica = await buildTestApp(t, databaseUrl);

async function login(email: string, password = PASSWORD): Promise<string> {
  const res = await app.inject({ method: 'POST', url: '/api/auth/login', payload: { email, password } });
  if (res.statusCode !== 200) throw new Error(`login ${email}: ${res.body}`);
  return res.json().token;
}

const ada = await createUser(db, { email: 'ada@example.test', password: PASSWORD, displayName: 'Ada' });
const workspace = await createTenant(db, ada.id, "Ada's workspace");
const adaToken = await login('ada@example.test');
const as = (token: string, tenantId = workspace.id) => ({ authorization: `Bearer ${token}`, 'x-tenant-id': tenantId });
const invite = (email: string, role: string, token = adaToken) =>
  app.inject({ method: 'POST', url: '/api/tenants/invitations', headers: as(token), payload: { email, role } });
const accept = (body: Record<string, unknown>, headers: Record<string, string> = {}) =>
  app.inject({ method: 'POST', url: '/api/invitations/accept', headers, payload: body });
const tokenOf = (link: string) => link.slice(link.indexOf('#') + 1);
const members = async (token = adaToken) =>
  (await app.inject({ url: '/api/tenants/members', headers: as(token) })).json().items as Array<Record<string, any>>;

t.test('an invitation: the one-time link in the answer, the token hashed at rest, never logged', async (t) => {
  const res = await invite('grace@example.test', 'member');
  t.equal(res.statusCode, 201, res.body);
  const body = res.json();
  t.match(body, {
    email: 'grace@example.test',
    role: 'member',
    emailed: false,
    emailStatus: 'not_sent',
    expired: false,
  });
  t.match(body.message, /not e-mailed/);
  t.match(body.link, /^http:\/\/localhost:\d+\/invitations\/accept#inv_[\w-]{40,}$/, 'the token rides in the fragment');
  const hours = (Date.parse(body.expiresAt) - Date.now()) / 3_600_000;
  t.ok(hours > 167 && hours <= 168, 'expires in 7 days');
  const token = tokenOf(body.link);
  const stored = await db.one(
    sql.unsafe`select encode(token_hash, 'hex') as h from tenant_invitations where id = ${body.id}`,
  );
  t.not(stored.h, token);
  t.notOk(
    (await db.any(sql.unsafe`select * from tenant_invitations`)).some((r) => JSON.stringify(r).includes(token)),
    'no column holds the token',
  );
  t.notOk(logs().includes(token), 'the token is in no log line');

  const listed = await app.inject({ url: '/api/tenants/invitations', headers: as(adaToken) });
  t.equal(listed.statusCode, 200);
  t.same(
    listed.json().items.map((i: any) => [i.email, i.role, i.invitedBy]),
    [['grace@example.test', 'member', 'ada@example.test']],
  );
  t.notOk(listed.body.includes(token), 'links are never shown again');
});

let graceToken = '';
t.test('accepting as a new account: joins, is signed in, and the link works once', async (t) => {
  const link = (
    await app.inject({
      method: 'POST',
      url: '/api/tenants/invitations',
      headers: as(adaToken),
      payload: { email: 'grace@example.test', role: 'member' },
    })
  ).json().link;
  const token = tokenOf(link);
  const bad = await accept({ token });
  t.equal(bad.statusCode, 400, 'without a platform token, a name and a password are needed');
  t.match(bad.json().message, /name.*password/);
  t.equal((await accept({ token: 'inv_nosuchtoken', name: 'Grace', password: PASSWORD })).statusCode, 404);

  const res = await accept({ token, name: 'Grace Hopper', password: PASSWORD });
  t.equal(res.statusCode, 200, res.body);
  t.match(res.json(), {
    tenantId: workspace.id,
    tenantName: "Ada's workspace",
    role: 'member',
    session: { tokenType: 'Bearer', user: { email: 'grace@example.test', name: 'Grace Hopper' } },
  });
  graceToken = res.json().session.token;
  t.equal(
    (await accept({ token, name: 'Grace', password: PASSWORD })).json().error,
    'invitation_used',
    'an invitation works once',
  );
  t.equal((await accept({ token, name: 'Grace', password: PASSWORD })).statusCode, 410);

  const chat = await app.inject({
    method: 'POST',
    url: '/api/chat/sessions',
    headers: as(graceToken),
    payload: { title: 'Grace here' },
  });
  t.equal(chat.statusCode, 201, 'a member may start a session');
  const keys = await app.inject({
    method: 'PUT',
    url: '/api/provider-keys/openai',
    headers: as(graceToken),
    payload: { apiKey: 'sk-test-1234567890abcdef' },
  });
  t.equal(keys.statusCode, 403, 'but not manage the workspace');
  t.match(keys.json().message, /Admin role/);
  t.same(
    (await members()).map((m) => [m.email, m.role, m.owner]),
    [
      ['ada@example.test', 'admin', true],
      ['grace@example.test', 'member', false],
    ],
  );
  t.equal((await invite('grace@example.test', 'viewer')).json().error, 'already_member');
  t.equal((await invite('GRACE@example.test', 'viewer')).statusCode, 409, 'whatever the case of the address');
});

t.test('accepting signed in: the invited address joins, another is refused', async (t) => {
  await createUser(db, { email: 'lin@example.test', password: PASSWORD });
  const linToken = await login('lin@example.test');
  const forLin = tokenOf((await invite('lin@example.test', 'viewer')).json().link);
  const asGrace = await accept({ token: forLin }, { authorization: `Bearer ${graceToken}` });
  t.equal(asGrace.statusCode, 403);
  t.equal(asGrace.json().error, 'invitation_email_mismatch');
  t.match(asGrace.json().message, /for lin@example\.test; you are signed in as grace@example\.test/);
  t.equal(
    (await accept({ token: forLin, name: 'Lin', password: PASSWORD })).json().error,
    'account_exists',
    'an existing account signs in first',
  );
  const res = await accept({ token: forLin }, { authorization: `Bearer ${linToken}` });
  t.equal(res.statusCode, 200, res.body);
  t.match(res.json(), { role: 'viewer', session: null });
  const write = await app.inject({ method: 'POST', url: '/api/chat/sessions', headers: as(linToken), payload: {} });
  t.equal(write.statusCode, 403, 'a viewer reads only');
  t.match(write.json().message, /Member role \(or Admin\)/);
  t.equal(
    (await app.inject({ url: '/api/tenants/members', headers: as(linToken) })).statusCode,
    200,
    'a viewer sees the members',
  );
  t.equal(
    (await app.inject({ url: '/api/tenants/invitations', headers: as(linToken) })).statusCode,
    403,
    'but not the invitations',
  );
  t.equal((await app.inject({ url: '/api/tenants/audit', headers: as(linToken) })).statusCode, 403, 'nor the audit');
});

t.test('revoked, replaced and expired invitations answer their own codes', async (t) => {
  const first = (await invite('max@example.test', 'member')).json();
  const second = (await invite('max@example.test', 'admin')).json();
  t.equal(
    (await accept({ token: tokenOf(first.link), name: 'Max', password: PASSWORD })).json().error,
    'invitation_revoked',
    'a new invitation replaces the open one',
  );
  const revoked = await app.inject({
    method: 'DELETE',
    url: `/api/tenants/invitations/${second.id}`,
    headers: as(adaToken),
  });
  t.equal(revoked.statusCode, 204);
  t.equal(
    (await app.inject({ method: 'DELETE', url: `/api/tenants/invitations/${second.id}`, headers: as(adaToken) }))
      .statusCode,
    204,
    'repeatable',
  );
  t.equal(
    (await accept({ token: tokenOf(second.link), name: 'Max', password: PASSWORD })).json().error,
    'invitation_revoked',
  );
  const third = (await invite('max@example.test', 'member')).json();
  await db.query(
    sql.unsafe`update tenant_invitations set expires_at = now() - interval '1 second' where id = ${third.id}`,
  );
  const expired = await accept({ token: tokenOf(third.link), name: 'Max', password: PASSWORD });
  t.equal(expired.statusCode, 410);
  t.equal(expired.json().error, 'invitation_expired');
  const listed = (await app.inject({ url: '/api/tenants/invitations', headers: as(adaToken) })).json().items;
  t.match(
    listed.find((i: any) => i.id === third.id),
    { expired: true },
    'an expired one is listed as such',
  );
  const other = await createTenant(db, ada.id, 'Other');
  t.equal(
    (
      await app.inject({
        method: 'DELETE',
        url: `/api/tenants/invitations/${third.id}`,
        headers: as(adaToken, other.id),
      })
    ).statusCode,
    404,
    "another workspace's invitation is not found",
  );
  await app.inject({ method: 'DELETE', url: `/api/tenants/invitations/${third.id}`, headers: as(adaToken) });
});

t.test('bounds: open invitations and invitations a day', async (t) => {
  await db.query(
    sql.unsafe`update tenant_invitations set revoked_at = now() where tenant_id = ${workspace.id} and accepted_at is null and revoked_at is null`,
  );
  const sent = await db.oneFirst(
    sql.unsafe`select count(*)::int from tenant_invitations where tenant_id = ${workspace.id}`,
  );
  const results: number[] = [];
  for (let i = 0; results.at(-1) !== 429 && i < 10; i++)
    results.push((await invite(`bulk${i}@example.test`, 'viewer')).statusCode);
  // INVITATIONS_PENDING_MAX=5, INVITATIONS_PER_DAY=8 (this test file's settings)
  const open = Math.min(5, 8 - Number(sent));
  t.same(results.slice(0, open), Array(open).fill(201));
  const refused = await invite('one-more@example.test', 'viewer');
  t.ok([409, 429].includes(refused.statusCode));
  t.match(refused.json().error, /^(too_many_pending_invitations|invitation_limit)$/);
  t.match(refused.json().message, /INVITATIONS_(PENDING_MAX|PER_DAY)/);
  await db.query(
    sql.unsafe`update tenant_invitations set revoked_at = now() where tenant_id = ${workspace.id} and accepted_at is null and revoked_at is null`,
  );
  await db.query(
    sql.unsafe`update tenant_invitations set created_at = created_at - interval '2 days', expires_at = expires_at - interval '2 days' where tenant_id = ${workspace.id}`,
  );
  const bad = await app.inject({
    method: 'POST',
    url: '/api/tenants/invitations',
    headers: as(adaToken),
    payload: { email: 'not an address', role: 'member' },
  });
  t.equal(bad.statusCode, 400);
  t.equal(
    (
      await app.inject({
        method: 'POST',
        url: '/api/tenants/invitations',
        headers: as(adaToken),
        payload: { email: 'x@example.test', role: 'owner' },
      })
    ).statusCode,
    400,
  );
});

t.test('roles change and members go under the last-Admin and owner rules, audited', async (t) => {
  const grace = (await members()).find((m) => m.email === 'grace@example.test')!;
  const promoted = await app.inject({
    method: 'PATCH',
    url: `/api/tenants/members/${grace.userId}`,
    headers: as(adaToken),
    payload: { role: 'admin' },
  });
  t.equal(promoted.statusCode, 200, promoted.body);
  t.match(promoted.json(), { role: 'admin', you: false });
  const demoteOwner = await app.inject({
    method: 'PATCH',
    url: `/api/tenants/members/${ada.id}`,
    headers: as(graceToken),
    payload: { role: 'viewer' },
  });
  t.equal(demoteOwner.statusCode, 409);
  t.equal(demoteOwner.json().error, 'owner_protected');
  const removeOwner = await app.inject({
    method: 'DELETE',
    url: `/api/tenants/members/${ada.id}`,
    headers: as(graceToken),
  });
  t.equal(removeOwner.json().error, 'owner_protected');
  t.equal(
    (await app.inject({ method: 'POST', url: '/api/tenants/leave', headers: as(adaToken) })).json().error,
    'owner_protected',
  );

  // A workspace without an owner (its account deleted) keeps its last Admin.
  const orphan = await createTenant(db, ada.id, 'Orphan');
  await db.query(sql.unsafe`update tenants set owner_id = null where id = ${orphan.id}`);
  const self = await app.inject({
    method: 'PATCH',
    url: `/api/tenants/members/${ada.id}`,
    headers: as(adaToken, orphan.id),
    payload: { role: 'member' },
  });
  t.equal(self.statusCode, 409);
  t.equal(self.json().error, 'last_admin');
  t.match(self.json().message, /at least one Admin/);
  t.equal(
    (await app.inject({ method: 'POST', url: '/api/tenants/leave', headers: as(adaToken, orphan.id) })).json().error,
    'last_admin',
  );

  t.equal(
    (
      await app.inject({
        method: 'PATCH',
        url: `/api/tenants/members/${grace.userId}`,
        headers: as(adaToken),
        payload: { role: 'member' },
      })
    ).statusCode,
    200,
  );
  const unknown = await app.inject({
    method: 'DELETE',
    url: `/api/tenants/members/${orphan.id}`,
    headers: as(adaToken),
  });
  t.equal(unknown.statusCode, 404, 'not a member: 404');
});

t.test('the owner hands the workspace over to another Admin, and may then leave', async (t) => {
  const kai = await createUser(db, { email: 'kai@example.test', password: PASSWORD, displayName: 'Kai' });
  const kaiToken = await login('kai@example.test');
  const handover = await createTenant(db, kai.id, 'Handover');
  const noor = await createUser(db, { email: 'noor@example.test', password: PASSWORD, displayName: 'Noor' });
  await db.query(
    sql.unsafe`insert into tenant_memberships (tenant_id, user_id, role) values (${handover.id}, ${noor.id}, 'member')`,
  );
  const noorToken = await login('noor@example.test');
  const handTo = (userId: string, token: string, tenantId = handover.id) =>
    app.inject({ method: 'POST', url: '/api/tenants/owner', headers: as(token, tenantId), payload: { userId } });
  const accountOf = (tenantId: string) =>
    db.oneFirst(sql.type(z.object({ account_id: z.string() }))`select account_id from tenants where id = ${tenantId}`);

  const notAdmin = await handTo(noor.id, kaiToken);
  t.equal(notAdmin.statusCode, 409);
  t.equal(notAdmin.json().error, 'owner_must_be_admin');
  t.equal((await handTo(noor.id, noorToken)).statusCode, 403, 'a Member cannot');
  await app.inject({
    method: 'PATCH',
    url: `/api/tenants/members/${noor.id}`,
    headers: as(kaiToken, handover.id),
    payload: { role: 'admin' },
  });
  const taken = await handTo(noor.id, noorToken);
  t.equal(taken.statusCode, 403, 'an Admin who is not the owner cannot take it');
  t.equal(taken.json().error, 'owner_required');
  t.equal((await handTo(randomUUID(), kaiToken)).statusCode, 404, 'not a member: 404');
  t.equal(await accountOf(handover.id), kai.id, 'refusals changed nothing');

  const given = await handTo(noor.id, kaiToken);
  t.equal(given.statusCode, 200, given.body);
  t.match(given.json(), { userId: noor.id, role: 'admin', owner: true });
  t.equal(await accountOf(handover.id), noor.id, "the workspace counts for Noor's account now");
  const inHandover = (await app.inject({ url: '/api/tenants/members', headers: as(kaiToken, handover.id) })).json()
    .items as Array<Record<string, unknown>>;
  t.same(
    inHandover.map((m) => [m.email, m.owner]),
    [
      ['kai@example.test', false],
      ['noor@example.test', true],
    ],
  );
  t.equal((await handTo(noor.id, noorToken)).statusCode, 200, 'naming the owner again changes nothing');
  const audit = (await app.inject({ url: '/api/tenants/audit?limit=1', headers: as(noorToken, handover.id) })).json()
    .items[0];
  t.match(audit, {
    action: 'owner_transferred',
    actor: { email: 'kai@example.test' },
    subject: { userId: noor.id, email: 'noor@example.test' },
  });
  const left = await app.inject({ method: 'POST', url: '/api/tenants/leave', headers: as(kaiToken, handover.id) });
  t.equal(left.statusCode, 204, 'the former owner may leave');
  t.equal(
    (await app.inject({ method: 'POST', url: '/api/tenants/leave', headers: as(noorToken, handover.id) })).json().error,
    'owner_protected',
    'the new owner is held by the rule',
  );

  // A workspace nobody owns: any of its Admins may name its owner.
  const orphan = await createTenant(db, kai.id, 'Nobody owns this');
  await db.query(sql.unsafe`update tenants set owner_id = null where id = ${orphan.id}`);
  const named = await handTo(kai.id, kaiToken, orphan.id);
  t.equal(named.statusCode, 200, named.body);
  t.equal(await accountOf(orphan.id), kai.id);
});

t.test('a removed member is refused at once, on every replica; their account and other workspaces stay', async (t) => {
  const grace = (await members()).find((m) => m.email === 'grace@example.test')!;
  const graceOwn = await createTenant(db, grace.userId, "Grace's own");
  const read = (on = app) => on.inject({ url: '/api/chat/sessions', headers: as(graceToken) });
  t.equal((await read()).statusCode, 200);
  t.equal((await read(replica.app)).statusCode, 200, 'the replica has her membership cached');
  const removed = await app.inject({
    method: 'DELETE',
    url: `/api/tenants/members/${grace.userId}`,
    headers: as(adaToken),
  });
  t.equal(removed.statusCode, 204);
  t.equal((await read()).statusCode, 404, 'refused here at once');
  // The replica hears the membership's NOTIFY; its next request after that is refused.
  let status = 0;
  for (let i = 0; i < 200 && status !== 404; i++) {
    status = (await read(replica.app)).statusCode;
    if (status !== 404) await new Promise((r) => setTimeout(r, 25));
  }
  t.equal(status, 404, 'and on the other replica');
  t.equal(
    (await app.inject({ url: '/api/auth/me', headers: { authorization: `Bearer ${graceToken}` } })).statusCode,
    200,
    'her account works',
  );
  t.equal(
    (await app.inject({ url: '/api/chat/sessions', headers: as(graceToken, graceOwn.id) })).statusCode,
    200,
    'in her own workspace too',
  );
});

t.test('the audit: every change, who, whom, from which role to which, newest first', async (t) => {
  const res = await app.inject({ url: '/api/tenants/audit?limit=100', headers: as(adaToken) });
  t.equal(res.statusCode, 200);
  const items = res.json().items as Array<Record<string, any>>;
  const line = (e: any) => `${e.action} ${e.actor.email} ${e.subject.email} ${e.fromRole ?? '-'}>${e.toRole ?? '-'}`;
  const lines = items.map(line).reverse();
  t.ok(lines.includes('invitation_created ada@example.test grace@example.test ->member'));
  t.ok(lines.includes('invitation_accepted grace@example.test grace@example.test ->member'));
  t.ok(lines.includes('invitation_accepted lin@example.test lin@example.test ->viewer'));
  t.ok(lines.includes('invitation_revoked ada@example.test max@example.test ->-'));
  const tail = lines.slice(-3);
  t.same(tail, [
    'role_changed ada@example.test grace@example.test member>admin',
    'role_changed ada@example.test grace@example.test admin>member',
    'member_removed ada@example.test grace@example.test member>-',
  ]);
  t.notOk(
    items.some((e) => e.action === 'role_changed' && e.toRole === 'viewer'),
    'refused changes are not recorded',
  );
  const page1 = (await app.inject({ url: '/api/tenants/audit?limit=2', headers: as(adaToken) })).json();
  const page2 = (
    await app.inject({ url: `/api/tenants/audit?limit=2&cursor=${page1.nextCursor}`, headers: as(adaToken) })
  ).json();
  t.same(
    [...page1.items, ...page2.items].map((e: any) => e.id),
    items.slice(0, 4).map((e) => e.id),
    'pages follow on',
  );
});

t.test('a member leaves', async (t) => {
  const lin = await login('lin@example.test');
  t.equal((await app.inject({ method: 'POST', url: '/api/tenants/leave', headers: as(lin) })).statusCode, 204);
  t.equal((await app.inject({ url: '/api/tenants/members', headers: as(lin) })).statusCode, 404);
  const last = (await app.inject({ url: '/api/tenants/audit?limit=1', headers: as(adaToken) })).json().items[0];
  t.match(last, {
    action: 'member_left',
    actor: { email: 'lin@example.test' },
    subject: { email: 'lin@example.test' },
    fromRole: 'viewer',
  });
});
