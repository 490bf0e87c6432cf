// altidp's signed server-to-server notifications: verified against the
// provider's JWKS (a real oidc-provider on loopback), stored once, applied by
// a real Graphile Worker job with each event type's effect.
import { exportJWK, generateKeyPair, type JWTPayload } from 'jose';
import t from 'tap';
import { z } from 'zod';
import { createUser } from '../../../../core/accounts/users.ts';
import { sql } from '../../../../core/db/pool.ts';
import { buildTestApp } from '../../../helpers/app.ts';
import { createTestDatabase, rowCount } from '../../../helpers/db.ts';
import { startOidcServer } from '../../../helpers/oidc-server.ts';
import { waitFor } from '../../../helpers/wait.ts';
import { startTestWorker } from '../../../helpers/worker.ts';

const op = await startOidcServer(t, {
  clients: [
    {
      client_id: 'platform-alt',
      client_secret: 'platform-alt-secret-0123456789',
      redirect_uris: ['http://localhost:3000/api/auth/altidp/callback'],
    },
  ],
});
const databaseUrl = await createTestDatabase(t);
const { app, db } = await buildTestApp(t, databaseUrl, { ALTIDP_ISSUER: op.issuer, ALTIDP_CLIENT_ID: 'platform-alt' });
await startTestWorker(t, databaseUrl);

let jti = 0;
async function notification(
  event: Record<string, unknown>,
  overrides: JWTPayload = {},
  key?: Awaited<ReturnType<typeof exportJWK>>,
) {
  const now = Math.floor(Date.now() / 1000);
  return op.sign(
    {
      iss: op.issuer,
      aud: 'platform-alt',
      iat: now,
      exp: now + 300,
      jti: `n-${++jti}`,
      events: JSON.stringify({ event_time: now * 1000, ...event }),
      ...overrides,
    },
    key ? { key } : {},
  );
}
const send = (payload: string) =>
  app.inject({ method: 'POST', url: '/api/auth/altidp/notifications', payload: { payload } });

const Row = z.object({ status: z.string(), outcome: z.string().nullable() });
const applied = (id: string) =>
  waitFor(`notification ${id} applied`, async () => {
    const row = await db.one(sql.type(Row)`select status, outcome from altidp_notifications where id = ${id}`);
    return row.status === 'queued' ? null : row;
  });
const count = (table: string) => rowCount(db, table);

/** A person who signed in with altidp (identity token), with a refresh token. */
async function altidpUser(sub: string, email: string) {
  const now = Math.floor(Date.now() / 1000);
  const token = await op.sign({
    iss: op.issuer,
    aud: 'platform-alt',
    sub,
    email,
    email_verified: true,
    iat: now,
    exp: now + 600,
  });
  const res = await app.inject({
    method: 'POST',
    url: '/api/auth/altidp',
    payload: { identityToken: token },
    remoteAddress: `10.3.0.${++jti % 250}`,
  });
  if (res.statusCode !== 200) throw new Error(res.body);
  return res.json() as { user: { id: string }; refreshToken: string };
}
const refresh = (refreshToken: string) =>
  app.inject({ method: 'POST', url: '/api/auth/refresh', payload: { refreshToken } });
const identity = (sub: string) =>
  db.maybeOne(
    sql.type(
      z.object({ email_status: z.string().nullable() }),
    )`select email_status from user_identities where provider = 'altidp' and subject = ${sub}`,
  );

t.test('email-disabled and email-enabled are recorded on the identity', async (t) => {
  await altidpUser('sub-relay', 'relay@relay.example');
  const off = await send(
    await notification({ type: 'email-disabled', sub: 'sub-relay', email: 'relay@relay.example' }),
  );
  t.equal(off.statusCode, 200, off.body);
  t.match(off.json(), { received: true, duplicate: false, status: 'queued' });
  t.match(await applied(await lastId()), { status: 'applied', outcome: 'email_disabled' });
  t.same(await identity('sub-relay'), { email_status: 'disabled' });
  const on = await send(await notification({ type: 'email-enabled', sub: 'sub-relay' }));
  t.match(await applied(await lastId()), { outcome: 'email_enabled' });
  t.equal(on.statusCode, 200);
  t.same(await identity('sub-relay'), { email_status: 'enabled' });
});

async function lastId() {
  return db.oneFirst(
    sql.type(z.object({ id: z.string() }))`select id from altidp_notifications order by received_at desc, id limit 1`,
  );
}

t.test('consent-revoked unlinks the identity and revokes refresh tokens; the account stays', async (t) => {
  const person = await altidpUser('sub-consent', 'consent@relay.example');
  await send(await notification({ type: 'consent-revoked', sub: 'sub-consent' }));
  t.match(await applied(await lastId()), { outcome: 'identity_unlinked' });
  t.equal(await identity('sub-consent'), null);
  t.equal((await refresh(person.refreshToken)).statusCode, 401, 'the refresh token no longer works');
  t.ok(await db.exists(sql.unsafe`select 1 from users where id = ${person.user.id}`));
});

t.test('account-delete deletes an account nothing else signs in; keeps one with a password', async (t) => {
  const only = await altidpUser('sub-only', 'only@relay.example');
  await send(await notification({ type: 'account-delete', sub: 'sub-only' }));
  t.match(await applied(await lastId()), { outcome: 'account_deleted' });
  t.notOk(await db.exists(sql.unsafe`select 1 from users where id = ${only.user.id}`));

  const withPassword = await createUser(db, { email: 'both@relay.example', password: 'a-password-of-her-own' });
  const linked = await altidpUser('sub-both', 'both@relay.example');
  t.equal(linked.user.id, withPassword.id, 'the verified e-mail linked to the password account');
  await send(await notification({ type: 'account-delete', sub: 'sub-both' }));
  t.match(await applied(await lastId()), { outcome: 'identity_unlinked' });
  t.ok(await db.exists(sql.unsafe`select 1 from users where id = ${withPassword.id}`));
  t.equal((await refresh(linked.refreshToken)).statusCode, 401);
});

t.test('the same notification twice is stored and applied once; unknown types are recorded', async (t) => {
  await altidpUser('sub-twice', 'twice@relay.example');
  const payload = await notification({ type: 'email-disabled', sub: 'sub-twice' });
  const first = await send(payload);
  const second = await send(payload);
  t.match(second.json(), { received: true, duplicate: true });
  t.equal(first.statusCode, 200);
  t.equal(
    await db.oneFirst(
      sql.type(
        z.object({ n: z.number() }),
      )`select count(*)::int as n from altidp_notifications where claims->>'jti' = ${`n-${jti}`}`,
    ),
    1,
  );

  const unknown = await send(await notification({ type: 'something-new', sub: 'sub-twice' }));
  t.equal(unknown.statusCode, 200);
  t.match(unknown.json(), { received: true, duplicate: false, status: 'ignored' });
});

t.test('a JWS signed by another key, for another audience, or expired → 400, nothing stored', async (t) => {
  const before = await count('altidp_notifications');
  const { privateKey } = await generateKeyPair('RS256', { extractable: true });
  const otherKey = { ...(await exportJWK(privateKey)), alg: 'RS256' };
  const now = Math.floor(Date.now() / 1000);
  const cases: Array<[string, string]> = [
    ['another key', await notification({ type: 'consent-revoked', sub: 'sub-relay' }, {}, otherKey)],
    ['another audience', await notification({ type: 'consent-revoked', sub: 'sub-relay' }, { aud: 'someone-else' })],
    [
      'expired',
      await notification({ type: 'consent-revoked', sub: 'sub-relay' }, { iat: now - 7200, exp: now - 3600 }),
    ],
    ['not a JWS', 'not.a.jws'],
  ];
  for (const [what, payload] of cases) {
    const res = await send(payload);
    t.equal(res.statusCode, 400, what);
    t.match(res.json(), { error: 'invalid_signature' }, what);
  }
  t.equal(await count('altidp_notifications'), before);
  t.not(await identity('sub-relay'), null, 'the identity is untouched');
});
