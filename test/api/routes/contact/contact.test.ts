// The contact form and the operator's view of it.
import t from 'tap';
import { z } from 'zod';
import { createUser } from '../../../../core/accounts/users.ts';
import { signPlatformToken } from '../../../../core/auth/platform-token.ts';
import { sql } from '../../../../core/db/pool.ts';
import { buildTestApp } from '../../../helpers/app.ts';
import { TEST_SECRET } from '../../../helpers/config.ts';
import { createTestDatabase } from '../../../helpers/db.ts';
import { createMember } from '../../../helpers/fixtures.ts';

const databaseUrl = await createTestDatabase(t);
const { app, db } = await buildTestApp(t, databaseUrl);
const operator = await createUser(db, { email: 'ops@example.test', password: 'operator-password', operator: true });
const opToken = await signPlatformToken(
  { userId: operator.id },
  Buffer.from(TEST_SECRET, 'base64'),
  'http://localhost:3000',
);
const someone = await createMember(db, 'admin');
const op = { authorization: `Bearer ${opToken}` };
const message = (i: number) => ({
  name: `Sender ${i}`,
  email: `s${i}@example.test`,
  subject: 'Hello',
  message: `Message number ${i}`,
});

t.test('anyone can submit; the sixth in 15 minutes from one IP is 429', async (t) => {
  for (let i = 1; i <= 5; i++) {
    const res = await app.inject({
      method: 'POST',
      url: '/api/contact/',
      payload: message(i),
      remoteAddress: '10.5.0.1',
    });
    t.equal(res.statusCode, 201);
    t.equal(res.json().status, 'received');
  }
  const sixth = await app.inject({
    method: 'POST',
    url: '/api/contact/',
    payload: message(6),
    remoteAddress: '10.5.0.1',
  });
  t.equal(sixth.statusCode, 429);
  t.ok(Number(sixth.headers['retry-after']) > 0);
});

t.test('submissions are validated and length-limited; nothing written on failure', async (t) => {
  const before = await db.oneFirst(
    sql.type(z.object({ n: z.number() }))`select count(*)::int as n from contact_submissions`,
  );
  const cases = [
    {},
    { ...message(1), email: 'nope' },
    { ...message(1), message: 'x'.repeat(5001) },
    { ...message(1), name: 'two\nlines' },
    { ...message(1), message: '   ' },
  ];
  for (const payload of cases) {
    const res = await app.inject({ method: 'POST', url: '/api/contact/', payload, remoteAddress: '10.5.0.2' });
    t.equal(res.statusCode, 400, JSON.stringify(payload).slice(0, 60));
    t.match(res.json(), { error: 'invalid_request', status: 400 });
  }
  t.equal(
    await db.oneFirst(sql.type(z.object({ n: z.number() }))`select count(*)::int as n from contact_submissions`),
    before,
  );
});

t.test('only the operator lists, pages, updates and deletes', async (t) => {
  const user = { authorization: `Bearer ${someone.token}` };
  t.equal((await app.inject({ url: '/api/contacts/' })).statusCode, 401);
  t.equal((await app.inject({ url: '/api/contacts/', headers: user })).statusCode, 403);

  const first = await app.inject({ url: '/api/contacts/?limit=2', headers: op });
  t.equal(first.statusCode, 200);
  const page1 = first.json();
  t.equal(page1.items.length, 2);
  t.equal(page1.items[0].name, 'Sender 5', 'newest first');
  // A submission arriving while paging does not shift the pages.
  await app.inject({ method: 'POST', url: '/api/contact/', payload: message(9), remoteAddress: '10.5.0.3' });
  const page2 = (await app.inject({ url: `/api/contacts/?limit=2&cursor=${page1.nextCursor}`, headers: op })).json();
  t.same(
    page2.items.map((i: { name: string }) => i.name),
    ['Sender 3', 'Sender 2'],
  );
  const page3 = (await app.inject({ url: `/api/contacts/?limit=2&cursor=${page2.nextCursor}`, headers: op })).json();
  t.same(
    page3.items.map((i: { name: string }) => i.name),
    ['Sender 1'],
  );
  t.equal(page3.nextCursor, null);
  t.equal((await app.inject({ url: '/api/contacts/?cursor=garbage', headers: op })).statusCode, 400);
  t.equal((await app.inject({ url: '/api/contacts/?limit=101', headers: op })).statusCode, 400);

  const id = page1.items[0].id;
  const patched = await app.inject({
    method: 'PATCH',
    url: `/api/contacts/${id}`,
    headers: op,
    payload: { status: 'resolved' },
  });
  t.equal(patched.statusCode, 200);
  t.equal(patched.json().status, 'resolved');
  t.equal(
    (await app.inject({ method: 'PATCH', url: `/api/contacts/${id}`, headers: op, payload: { status: 'done' } }))
      .statusCode,
    400,
  );
  t.equal(
    (await app.inject({ method: 'PATCH', url: `/api/contacts/${id}`, headers: user, payload: { status: 'spam' } }))
      .statusCode,
    403,
  );
  const resolved = (await app.inject({ url: '/api/contacts/?status=resolved', headers: op })).json();
  t.same(
    resolved.items.map((i: { id: string }) => i.id),
    [id],
  );

  t.equal((await app.inject({ method: 'DELETE', url: `/api/contacts/${id}`, headers: op })).statusCode, 204);
  t.equal((await app.inject({ method: 'DELETE', url: `/api/contacts/${id}`, headers: op })).statusCode, 404);
  t.equal((await app.inject({ method: 'DELETE', url: `/api/contacts/not-a-uuid`, headers: op })).statusCode, 400);
});
