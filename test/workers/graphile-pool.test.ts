// The pool Graphile Worker runs on: a client released twice (Graphile's
// LISTEN connection, when the server ends it while its pool stops) goes
// back once, and the second release does nothing instead of throwing.
import type pg from 'pg';
import t from 'tap';
import { createLogger } from '../../core/logger.ts';
import { PatientPool } from '../../workers/graphile-pool.ts';
import { createTestDatabase } from '../helpers/db.ts';

const databaseUrl = await createTestDatabase(t);

t.test('a client released twice through the callback API goes back to the pool once', async (t) => {
  const pool = new PatientPool({ connectionString: databaseUrl, max: 2 }, createLogger('silent', 'test'));
  t.teardown(() => pool.end());
  const { client, done } = await new Promise<{ client: pg.PoolClient; done: (release?: unknown) => void }>(
    (resolve, reject) =>
      pool.connect((error, client, done) => (error || !client ? reject(error) : resolve({ client, done }))),
  );
  await client.query('select 1');
  done();
  t.doesNotThrow(() => done(), 'the second release is ignored');
  t.equal(pool.totalCount - pool.idleCount, 0, 'nothing is checked out');
  const again = await pool.connect();
  t.same((await again.query('select 2 as n')).rows, [{ n: 2 }], 'the pool still serves');
  again.release();
});
