// An external login is linked by the canonical address too: a provider's
// verified krİs@ (U+0130) is another mailbox than kris@, so it must not be
// handed kris's account (PostgreSQL's lower() made the two one); it is
// refused and nothing is created. The Kelvin sign is the letter K: linked.
import t from 'tap';
import { z } from 'zod';
import { createUser } from '../../../core/accounts/users.ts';
import { sql } from '../../../core/db/pool.ts';
import { signInExternal } from '../../../core/external-login/accounts.ts';
import { ExternalLoginError } from '../../../core/external-login/clients.ts';
import { createTestDatabase, rowCount, testPool } from '../../helpers/db.ts';

const db = await testPool(t, await createTestDatabase(t));
const kris = await createUser(db, { email: 'kris@example.test', password: 'correct horse battery staple' });
const verified = (subject: string, email: string) =>
  db.transaction((tx) => signInExternal(tx, { provider: 'partner', subject, email, emailVerified: true }));

t.test('a refused address links to no account and creates none', async (t) => {
  const users = await rowCount(db, 'users');
  for (const email of ['kr\u0130s@example.test', 'kri\u00DF@example.test', 'kris@example.test.']) {
    await t.rejects(
      verified(`sub ${email}`, email),
      { constructor: ExternalLoginError, code: 'email_unsupported' },
      email,
    );
  }
  t.equal(await rowCount(db, 'users'), users, 'no account made');
  const linked = await db.anyFirst(
    sql.type(z.object({ subject: z.string() }))`select subject from user_identities where provider = 'partner'`,
  );
  t.same(linked, [], 'nothing linked');
});

t.test('the Kelvin sign and fullwidth letters are the same address: linked to the account', async (t) => {
  t.match(await verified('kelvin', '\u212Aris@example.test'), { user: { id: kris.id }, linked: true });
  t.match(await verified('fullwidth', '\uFF4Bris@example.test'), { user: { id: kris.id }, linked: true });
});
