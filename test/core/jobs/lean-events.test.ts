// Lean job events and stream deltas (0054, core/jobs/events.ts, deltas.ts):
// one statement that changes many jobs announces each by id, version and
// tenant, in notifications under NOTIFY's limit, and only when what a status
// carries changed; a hub reads only the jobs it follows and decodes only
// their deltas; a stream it missed the beginning of is sent again from
// offset 0 by the worker's publisher.
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import t from 'tap';
import type { Interceptor } from 'slonik';
import { z } from 'zod';
import { createDatabasePool, sql } from '../../../core/db/pool.ts';
import { decodeDeltasOf, DeltaPublisher, encodeDeltas, type Delta } from '../../../core/jobs/deltas.ts';
import { JobEventHub } from '../../../core/jobs/events.ts';
import type { JobRow } from '../../../core/jobs/schema.ts';
import { testLogger } from '../../helpers/config.ts';
import { createTestDatabase, testPool } from '../../helpers/db.ts';
import { createMember, enqueue } from '../../helpers/fixtures.ts';
import { waitFor } from '../../helpers/wait.ts';

const databaseUrl = await createTestDatabase(t);
const db = await testPool(t, databaseUrl);
const member = await createMember(db);
const JOBS = 300;
const ids: string[] = [];
for (let i = 0; i < JOBS; i += 50)
  ids.push(
    ...(await Promise.all(
      Array.from({ length: Math.min(50, JOBS - i) }, () =>
        enqueue(db, { kind: 'diag.noop', tenantId: member.tenantId, input: {} }),
      ),
    )),
  );

const listener = new pg.Client({ connectionString: databaseUrl });
await listener.connect();
t.teardown(() => listener.end());
const heard: string[] = [];
listener.on('notification', (m) => m.channel === 'job_events' && m.payload && heard.push(m.payload));
await listener.query('listen job_events');
const entries = () => heard.flatMap((p) => p.split(','));

t.test('one statement over many jobs: id, version and tenant each, split under 8,000 bytes', async (t) => {
  heard.length = 0;
  await db.query(sql.unsafe`update jobs set progress = '{"n":1}' where tenant_id = ${member.tenantId}`);
  await waitFor('every job announced', async () => entries().length >= JOBS);
  t.ok(heard.length > 1, `${heard.length} notifications`);
  t.ok(
    heard.every((p) => Buffer.byteLength(p) < 8_000),
    'each under the limit',
  );
  const versions = new Map(
    (
      await db.any(sql.type(z.object({ id: z.string(), version: z.number() }))`
        select id, version from jobs where tenant_id = ${member.tenantId}`)
    ).map((r) => [r.id, r.version]),
  );
  const parsed = entries().map((e) => e.split(':'));
  t.same(new Set(parsed.map(([id]) => id)), new Set(ids), 'each job once');
  t.ok(
    parsed.every(([id, version, tenant]) => versions.get(id!) === Number(version) && tenant === member.tenantId),
    'with its version and tenant',
  );
});

t.test('a change of nothing a status carries is not announced', async (t) => {
  heard.length = 0;
  await db.query(sql.unsafe`update jobs set not_before = null where tenant_id = ${member.tenantId}`);
  await db.query(sql.unsafe`update jobs set progress = '{"n":2}' where id = ${ids[0]!}`);
  await waitFor('the marker change', async () => entries().some((e) => e.startsWith(`${ids[0]}:`)));
  t.same(
    entries().map((e) => e.split(':')[0]),
    [ids[0]],
    'only the job whose progress changed (notifications arrive in commit order)',
  );
});

t.test('a hub reads only the jobs it follows, and hears every change', async (t) => {
  const reads: Array<readonly unknown[]> = [];
  const recorder: Interceptor = {
    name: 'reads',
    beforeQueryExecution: (_context, query) => {
      if (/from jobs/.test(query.sql)) reads.push(query.values);
      return null;
    },
  };
  const pool = await createDatabasePool(databaseUrl, { interceptors: [recorder] });
  t.teardown(() => pool.end());
  const hub = new JobEventHub(databaseUrl, pool, testLogger('events'));
  t.teardown(() => hub.stop());
  await hub.start();
  let changes = 0;
  hub.onAnyJobChange(() => changes++);
  const followed = ids[1]!;
  const rows: JobRow[] = [];
  hub.subscribe(followed, (row) => rows.push(row));

  await db.query(
    sql.unsafe`update jobs set progress = '{"n":3}' where tenant_id = ${member.tenantId} and id <> ${followed}`,
  );
  await db.query(sql.unsafe`update jobs set progress = '{"n":4}' where id = ${followed}`);
  await waitFor('the followed job', async () => rows.some((r) => (r.progress as { n: number }).n === 4));
  t.ok(changes >= 2, `the console is told of every notification (${changes})`);
  t.same(
    rows.map((r) => (r.progress as { n: number }).n),
    [4],
    'the listener gets the followed job only, once',
  );
  t.same(
    reads.flatMap((values) => values.flat()),
    [followed],
    'and the only read is of that job',
  );
  const { version } = rows[0]!;
  await db.query(sql.unsafe`update jobs set status = 'cancelled', finished_at = now() where id = ${followed}`);
  await waitFor('its final state', async () => rows.some((r) => r.status === 'cancelled'));
  t.ok(rows.at(-1)!.version > version, 'versions only increase');
});

t.test('deltas: only the followed jobs are decoded', async (t) => {
  const [a, b] = [randomUUID(), randomUUID()];
  const payload = `${encodeDeltas([{ jobId: a, attempt: 1, offset: 0, text: 'Hi\nthere' }])[0]}\n${b} 1 0 "not json`;
  const asked: string[] = [];
  const out = decodeDeltasOf(payload, (id) => {
    asked.push(id);
    return id === a;
  });
  t.same(out, [{ jobId: a, attempt: 1, offset: 0, text: 'Hi\nthere' }]);
  t.same(asked, [a, b], 'each line is decided by its job id alone');
});

t.test('a hub that missed a stream gets it again from offset 0 from the publisher', async (t) => {
  const publisher = DeltaPublisher.connect(databaseUrl, testLogger('deltas'));
  t.teardown(() => publisher.stop());
  const hub = new JobEventHub(databaseUrl, db, testLogger('events'));
  t.teardown(() => hub.stop());
  await hub.start();
  const jobId = randomUUID();
  const full = 'Hello, world: a stream heard from its middle.';
  let sent = 3;
  publisher.publish({ jobId, attempt: 1, offset: 0, text: full.slice(0, sent) });
  await publisher.flush(); // nobody follows it yet: the hub is not even sent it
  const got: Delta[] = [];
  hub.subscribeDeltas(jobId, (d) => got.push(d));
  t.equal(hub.streamedSoFar(jobId), null, 'the hub has nothing of it');
  // Its next pieces continue nothing the hub has: it asks for the stream again.
  const next = async () => {
    if (sent < full.length) publisher.publish({ jobId, attempt: 1, offset: sent, text: full[sent++]! });
    await publisher.flush();
  };
  await waitFor('the stream from its beginning', async () => {
    await next();
    return got.length > 0;
  });
  t.equal(got[0]!.offset, 0, 'the text so far, in one delta from offset 0');
  t.ok(got[0]!.text.length > 3 && full.startsWith(got[0]!.text), `(${JSON.stringify(got[0]!.text)})`);
  while (sent < full.length) await next();
  await waitFor('the rest', async () => got.reduce((n, d) => n + d.text.length, 0) === full.length);
  let text = '';
  for (const d of got) {
    t.equal(d.offset, text.length, 'each delta continues the last');
    text += d.text;
  }
  t.equal(text, full, 'and they make the text');
  t.equal(hub.streamedSoFar(jobId)?.text, full, 'a later subscriber here starts from the beginning');
  t.ok(publisher.stats.replays >= 1, 'sent again once asked');
});
