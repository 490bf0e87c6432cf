import t from 'tap';
import { z } from 'zod';
import { checkPassword, createUser, EmailTakenError } from '../../../core/accounts/users.ts';
import { hashPassword } from '../../../core/crypto/passwords.ts';
import { migrate } from '../../../core/db/migrate.ts';
import { sql } from '../../../core/db/pool.ts';
import { testLogger } from '../../helpers/config.ts';
import { createDatabaseBefore, testPool } from '../../helpers/db.ts';

const PASSWORD = 'correct horse battery staple';

t.test('accounts and open invitations stored before 0049', async (t) => {
  const url = await createDatabaseBefore(t, '0049');

  const db = await testPool(t, url);
  const hash = await hashPassword(PASSWORD);
  const Ids = z.object({ fullwidth: z.string(), ascii: z.string(), eszett: z.string(), tenant: z.string() });
  // The fullwidth one is older: plain ASCII wins all the same.
  const ids = await db.one(sql.type(Ids)`
    with fullwidth as (insert into users (email, password_hash, created_at) values ('\uFF29ris@example.test', ${hash}, now() - interval '2 days') returning id),
      ascii as (insert into users (email, password_hash) values ('Iris@example.test', ${hash}) returning id),
      eszett as (insert into users (email, password_hash) values ('stra\u00DFe@example.test', ${hash}) returning id),
      tenant as (insert into tenants (name) values ('Upgraded') returning id)
    select fullwidth.id as fullwidth, ascii.id as ascii, eszett.id as eszett, tenant.id as tenant from fullwidth, ascii, eszett, tenant`);
  const invitation = (email: string, age: string) => sql.fragment`
    insert into tenant_invitations (tenant_id, email, role, token_hash, expires_at, created_at)
    values (${ids.tenant}, ${email}, 'member', sha256(gen_random_uuid()::text::bytea), now() + interval '7 days', now() - ${age}::interval) returning id`;
  const older = await db.oneFirst(
    sql.type(z.object({ id: z.string() }))`${invitation('\uFF49ris@example.test', '1 hour')}`,
  );
  const newer = await db.oneFirst(
    sql.type(z.object({ id: z.string() }))`${invitation('iris@example.test', '1 minute')}`,
  );

  t.ok((await migrate(url, testLogger())).applied.includes('0049_canonical_email.sql'));

  const keys = await db.any(
    sql.type(z.object({ id: z.string(), email_key: z.string().nullable() }))`select id, email_key from users`,
  );
  t.same(
    Object.fromEntries(keys.map((k) => [k.id, k.email_key])),
    { [ids.ascii]: 'iris@example.test', [ids.fullwidth]: null, [ids.eszett]: null },
    'the plain ASCII account keeps the address; the other and a refused address have no key',
  );
  t.equal((await checkPassword(db, '\uFF49RIS@example.test', PASSWORD))?.id, ids.ascii, 'every spelling finds it');
  t.equal(await checkPassword(db, 'stra\u00DFe@example.test', PASSWORD), null, 'a refused address signs in to nothing');
  await t.rejects(
    createUser(db, { email: 'IRIS@example.test', password: PASSWORD }),
    EmailTakenError,
    'the canonical address is taken',
  );
  await db.query(sql.unsafe`update users set email = 'iris.two@example.test' where id = ${ids.fullwidth}`);
  t.equal(
    (await checkPassword(db, 'iris.two@example.test', PASSWORD))?.id,
    ids.fullwidth,
    'another address from an operator gives the account back its sign-in',
  );

  const open = await db.anyFirst(
    sql.type(z.object({ id: z.string() }))`
      select id from tenant_invitations where accepted_at is null and revoked_at is null order by id`,
  );
  t.same(open, [newer], 'the newer invitation stays open');
  t.ok(
    await db.oneFirst(
      sql.type(
        z.object({ revoked: z.boolean() }),
      )`select revoked_at is not null as revoked from tenant_invitations where id = ${older}`,
    ),
    'the older one is revoked, as a new invitation replaces an open one',
  );
});

t.test('an address 0049 refuses, kept without a key, blocks nobody (0052)', async (t) => {
  const url = await createDatabaseBefore(t, '0049');
  const db = await testPool(t, url);
  const hash = await hashPassword(PASSWORD);
  // PostgreSQL's lower() folds U+0130 to i: the indexes on lower(email) held kris@ taken.
  const tenant = await db.oneFirst(sql.type(z.object({ id: z.string() }))`
    with kept as (insert into users (email, password_hash) values ('kr\u0130s@example.test', ${hash}))
    insert into tenants (name) values ('Upgraded') returning id`);
  const invite = (email: string) => sql.unsafe`
    insert into tenant_invitations (tenant_id, email, role, token_hash, expires_at)
    values (${tenant}, ${email}, 'member', sha256(gen_random_uuid()::text::bytea), now() + interval '7 days')`;
  await db.query(invite('kr\u0130s@example.test'));
  await migrate(url, testLogger());

  const kris = await createUser(db, { email: 'kris@example.test', password: PASSWORD });
  t.equal((await checkPassword(db, 'KRIS@example.test', PASSWORD))?.id, kris.id, 'the owner of kris@ signs up and in');
  await t.resolves(db.query(invite('kris@example.test')), 'and can be invited while the old invitation is open');
});
