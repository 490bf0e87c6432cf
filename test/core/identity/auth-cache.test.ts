// The api's agent cache forgets a registration when its NOTIFY arrives, and a
// snapshot read while an invalidation arrived is not kept: it may predate
// the change and would otherwise serve the old plan or status until expiry.
import { randomUUID } from 'node:crypto';
import t from 'tap';
import type { AgentContextRow } from '../../../core/agent/capabilities.ts';
import { createDatabasePool, sql } from '../../../core/db/pool.ts';
import { AgentAuthCache } from '../../../core/identity/auth-cache.ts';
import { JobEventHub } from '../../../core/jobs/events.ts';
import { testLogger } from '../../helpers/config.ts';
import { createTestDatabase } from '../../helpers/db.ts';
import { waitFor } from '../../helpers/wait.ts';

const databaseUrl = await createTestDatabase(t);
const db = await createDatabasePool(databaseUrl, { maximumPoolSize: 2 });
const hub = new JobEventHub(databaseUrl, db, testLogger());
await hub.start();
t.teardown(async () => {
  await hub.stop();
  await db.end();
});
const cache = new AgentAuthCache(hub);
await waitFor('the cache to listen', async () => {
  cache.rememberRegistration('probe', {} as AgentContextRow, cache.readStarted());
  return cache.registration('probe');
});
const snapshot = (plan: string) => ({ plan }) as unknown as AgentContextRow;
const invalidate = (id: string) => db.query(sql.unsafe`select pg_notify('agent_auth_events', ${id})`);

t.test('a NOTIFY makes every replica forget the registration', async (t) => {
  const id = randomUUID();
  cache.rememberRegistration(id, snapshot('free'), cache.readStarted());
  t.same(cache.registration(id), snapshot('free'));
  await invalidate(id);
  await waitFor('the invalidation', async () => cache.registration(id) === undefined);
  t.pass('forgotten');
});

t.test('a snapshot read while an invalidation arrived is not kept', async (t) => {
  const id = randomUUID();
  const readStarted = cache.readStarted();
  // The read is in flight; the change commits and its NOTIFY arrives.
  await invalidate(id);
  await waitFor('the invalidation', async () => cache.readStarted() !== readStarted);
  cache.rememberRegistration(id, snapshot('free'), readStarted);
  t.equal(cache.registration(id), undefined, 'the next request reads again');
  cache.rememberRegistration(id, snapshot('pro'), cache.readStarted());
  t.same(cache.registration(id), snapshot('pro'), 'a read started after it is kept');
});
