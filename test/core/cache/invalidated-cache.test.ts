// The per-replica cache dropped by NOTIFY: a value is kept until its key is
// announced changed; a value whose load overlapped a change is handed out
// but not kept (it may be the old one), so the next read loads again.
import t from 'tap';
import { InvalidatedCache } from '../../../core/cache/invalidated-cache.ts';
import { sql } from '../../../core/db/pool.ts';
import { JobEventHub } from '../../../core/jobs/events.ts';
import { createLogger } from '../../../core/logger.ts';
import { createTestDatabase, testPool } from '../../helpers/db.ts';
import { waitFor } from '../../helpers/wait.ts';

const databaseUrl = await createTestDatabase(t);
const db = await testPool(t, databaseUrl);
const hub = new JobEventHub(databaseUrl, db, createLogger('silent', 'test'));
await hub.start();
t.teardown(() => hub.stop());
const CHANNEL = 'test_cache_changed';
const cache = new InvalidatedCache<string>(hub, CHANNEL);
const notify = (key: string) => db.query(sql.unsafe`select pg_notify(${CHANNEL}, ${key})`);

t.test('kept until its key is announced changed', async (t) => {
  let loads = 0;
  const load = async () => `v${++loads}`;
  // Until its LISTEN is in place the cache keeps nothing: two reads load twice.
  await waitFor('the cache to listen', async () => {
    const first = await cache.get('warm', load);
    const second = await cache.get('warm', load);
    return first === second;
  });
  loads = 0;
  t.equal(await cache.get('a', load), 'v1');
  t.equal(await cache.get('a', load), 'v1', 'a hit');
  await notify('a');
  await waitFor('the change to be heard', async () => (await cache.get('a', load)) !== 'v1');
  t.equal(loads, 2);
});

t.test('a load that overlapped a change is handed out, not kept', async (t) => {
  let loads = 0;
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  const slow = async () => {
    loads++;
    await held;
    return 'read before the change';
  };
  t.equal(await cache.get('probe', async () => 'p1'), 'p1');
  const pending = cache.get('b', slow);
  await notify('b');
  await notify('probe');
  // NOTIFYs arrive in order: once the probe's is heard, so is b's, while b's load still waits.
  await waitFor('the changes to be heard', async () => (await cache.get('probe', async () => 'p2')) === 'p2');
  t.equal(loads, 1);
  release();
  t.equal(await pending, 'read before the change', 'the caller gets what it loaded');
  t.equal(await cache.get('b', async () => 'read after the change'), 'read after the change', 'not kept');
});
