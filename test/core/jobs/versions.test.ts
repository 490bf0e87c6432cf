// Every change of a job gives it its next version and a new updated_at
// (clients order what they hear by version), whether the statement sets
// them itself (the worker's hot statements) or leaves them to jobs_touch.
import pg from 'pg';
import t from 'tap';
import { z } from 'zod';
import { sql } from '../../../core/db/pool.ts';
import { enqueueJob } from '../../../core/jobs/enqueue.ts';
import { completeJobs, failJob, markRunning, reportProgress, waitJob } from '../../../core/jobs/lifecycle.ts';
import { createTestDatabase, testPool } from '../../helpers/db.ts';
import { createMember } from '../../helpers/fixtures.ts';

const databaseUrl = await createTestDatabase(t);
const db = await testPool(t, databaseUrl);
const prepared = new pg.Pool({ connectionString: databaseUrl, max: 1 });
t.teardown(() => prepared.end());
const member = await createMember(db);
const holder = { lockedBy: 'versions-test', lockedAt: new Date() };

const State = z.object({ version: z.number(), status: z.string(), later: z.boolean(), touched: z.boolean() });
let lastUpdate = 0;
async function state(jobId: string) {
  const row = await db.one(sql.type(State)`
    select version, status, not_before is not null as later, extract(epoch from updated_at) > ${lastUpdate} as touched
    from jobs where id = ${jobId}`);
  lastUpdate = await db.oneFirst(sql.type(z.object({ n: z.number() }))`
    select extract(epoch from updated_at)::float8 as n from jobs where id = ${jobId}`);
  return row;
}

t.test('each change is a new version, set by the statement or by jobs_touch', async (t) => {
  const { id } = await enqueueJob(db, { kind: 'diag.noop', tenantId: member.tenantId });
  t.match(await state(id), { version: 1, status: 'queued' });
  t.ok(await markRunning(db, id, 1, holder));
  t.match(await state(id), { version: 2, status: 'running', touched: true }, 'start');
  await reportProgress(prepared, id, 1, { step: 1 }, holder);
  t.match(await state(id), { version: 3, status: 'running', touched: true }, 'progress');
  await waitJob(db, { jobId: id, attempt: 1, until: new Date(Date.now() + 3_600_000), keepAttempt: true });
  const waiting = await state(id);
  t.ok(waiting.version > 3, 'a wait (jobs_touch: the wait and its wake-up are two changes)');
  t.match(waiting, { status: 'queued', later: true, touched: true });
  t.ok(await markRunning(db, id, 1, holder));
  t.match(await state(id), { version: waiting.version + 1, status: 'running', later: true }, 'started again');
  t.same([...(await completeJobs(prepared, [{ jobId: id, attempt: 1, result: { ok: true }, holder }]))], [id]);
  t.match(
    await state(id),
    { version: waiting.version + 2, status: 'succeeded', later: false, touched: true },
    'a result clears the wait',
  );
  await db.query(sql.unsafe`update jobs set progress = '{"note":1}' where id = ${id}`);
  t.match(await state(id), { version: waiting.version + 3, touched: true }, 'any other change (jobs_touch)');
});

t.test('a failure is one version and clears the wait', async (t) => {
  const { id } = await enqueueJob(db, { kind: 'diag.noop', tenantId: member.tenantId });
  await waitJob(db, { jobId: id, attempt: 0, until: new Date(Date.now() + 3_600_000), keepAttempt: true });
  const before = await state(id);
  t.ok(await markRunning(db, id, 1, holder));
  t.ok(await failJob(db, id, 1, { code: 'x', message: 'y' }, holder));
  t.match(await state(id), { version: before.version + 2, status: 'failed', later: false, touched: true });
});
