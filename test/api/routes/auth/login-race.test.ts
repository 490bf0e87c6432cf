// The login budget under a burst (issue 49, item 2): the check against the
// budget and the count are one step, so concurrent wrong passwords, sent to
// two api instances on one database (as two replicas would get them), get
// no more checks than the budget, and the right password sent after them
// waits for the lockout to end. Counts are asserted, never timings.
import t from 'tap';
import { z } from 'zod';
import { accountKey } from '../../../../core/accounts/login-throttle.ts';
import { createUser } from '../../../../core/accounts/users.ts';
import { sql } from '../../../../core/db/pool.ts';
import { buildTestApp } from '../../../helpers/app.ts';
import { createTestDatabase } from '../../../helpers/db.ts';

const PASSWORD = 'correct horse battery staple';
const PER_ACCOUNT = 7;
const PER_ADDRESS = 9;
const BURST = 30;
const settings = { LOGIN_FAILURES_PER_ACCOUNT: String(PER_ACCOUNT), LOGIN_FAILURES_PER_ADDRESS: String(PER_ADDRESS) };
const databaseUrl = await createTestDatabase(t);
// Two instances, each with its own pool: two api processes sharing the database.
const first = await buildTestApp(t, databaseUrl, settings);
const second = await buildTestApp(t, databaseUrl, settings);
const { db } = first;

const login = (i: number, email: string, password: string, remoteAddress: string) =>
  (i % 2 === 0 ? first : second).app.inject({
    method: 'POST',
    url: '/api/auth/login',
    payload: { email, password },
    remoteAddress,
  });

/** Sends all at once and answers how many got each status. */
async function burst(requests: Array<() => Promise<{ statusCode: number }>>): Promise<Record<number, number>> {
  const statuses = (await Promise.all(requests.map((send) => send()))).map((res) => res.statusCode);
  const counts: Record<number, number> = {};
  for (const status of statuses) counts[status] = (counts[status] ?? 0) + 1;
  return counts;
}

const hitsOf = (bucket: string, key: string) =>
  db.maybeOneFirst(
    sql.type(
      z.object({ hits: z.number() }),
    )`select hits from rate_limit_windows where bucket = ${bucket} and key = ${key}`,
  );

t.test(
  `${BURST} concurrent wrong passwords for one account get ${PER_ACCOUNT} checks; the right one then waits`,
  async (t) => {
    const target = await createUser(db, { email: 'burst@example.test', password: PASSWORD });
    // Each guess from its own address: only the account's budget applies.
    const counts = await burst(
      Array.from({ length: BURST }, (_, i) => () => login(i, target.email, `guess ${i}`, `10.51.0.${i + 1}`)),
    );
    t.same(counts, { 401: PER_ACCOUNT, 429: BURST - PER_ACCOUNT }, 'checked no more than the budget; the rest refused');
    t.equal(
      await hitsOf('login-failures-account', accountKey({ kind: 'login', email: target.email })!),
      PER_ACCOUNT,
      'and counted that many',
    );
    const right = await login(1, target.email, PASSWORD, '10.51.1.1');
    t.equal(right.statusCode, 429, 'the right password sent after the burst is refused');
    t.equal((await login(0, target.email, PASSWORD, '10.51.1.2')).statusCode, 429, 'on the other instance too');
    // The lockout ends when its window does: moved into the past here instead of waiting for it.
    await db.query(
      sql.unsafe`update rate_limit_windows set window_start = window_start - interval '1 day' where bucket = 'login-failures-account'`,
    );
    t.equal((await login(1, target.email, PASSWORD, '10.51.1.3')).statusCode, 200, 'and signs in once it has ended');
  },
);

t.test(
  `${BURST} concurrent wrong passwords from one address, across accounts, get ${PER_ADDRESS} checks`,
  async (t) => {
    const address = '10.52.0.1';
    const counts = await burst(
      Array.from({ length: BURST }, (_, i) => () => login(i, `stuffed-${i}@example.test`, 'leaked password', address)),
    );
    t.same(counts, { 401: PER_ADDRESS, 429: BURST - PER_ADDRESS });
    t.equal(await hitsOf('login-failures-address', address), PER_ADDRESS);
  },
);

t.test('a burst mixing right and wrong passwords: a correct login gives its reservation back', async (t) => {
  const address = '10.53.0.1';
  const people = await Promise.all(
    [0, 1, 2].map((i) => createUser(db, { email: `office-${i}@example.test`, password: PASSWORD })),
  );
  // Three colleagues behind one address log in at once, twice each, beside two typos.
  const counts = await burst([
    ...people.flatMap((p, i) => [
      () => login(i, p.email, PASSWORD, address),
      () => login(i + 1, p.email, PASSWORD, address),
    ]),
    () => login(0, people[0]!.email, 'a typo', address),
    () => login(1, people[1]!.email, 'a typo', address),
  ]);
  t.same(counts, { 200: 6, 401: 2 }, 'all checked: the budget holds them all');
  t.equal(await hitsOf('login-failures-address', address), 2, 'only the two typos stay counted');
});
