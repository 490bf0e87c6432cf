// Upgrades lose nothing: a database of migrations 0001-0052 holding platform
// jobs in every state, upgraded by the latest migrations and then worked by
// a worker of today. Every job is still there with its state, input and
// result; the final ones are unchanged; the unfinished ones finish (the one
// held by a worker that is gone after the dead-worker sweep), each serial
// queue in its order.
//
// The jobs are written as the code of 0052's time wrote them: platform_enqueue
// with that time's records, its queue_claim and job_wait, and its worker's
// status writes. Not through today's enqueueJobs and lifecycle.ts: those
// write today's schema, which a database before the upgrade does not have.
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import t, { type Test } from 'tap';
import { z } from 'zod';
import { migrate } from '../../../core/db/migrate.ts';
import { sql, type DatabasePool } from '../../../core/db/pool.ts';
import { findJobsByIds } from '../../../core/jobs/read.ts';
import { testLogger } from '../../helpers/config.ts';
import { createDatabaseBefore, testPool } from '../../helpers/db.ts';
import { waitFor } from '../../helpers/wait.ts';
import { startTestWorker } from '../../helpers/worker.ts';

type Spec = { kind: string; input: Record<string, unknown>; queue?: string; runAt?: Date };

/** platform_enqueue as core/jobs/enqueue.ts called it at 0052; returns the new ids in order. */
async function enqueue0052(db: DatabasePool, tenantId: string, specs: Spec[]): Promise<string[]> {
  const records = specs.map((s) => ({
    id: randomUUID(),
    tenant_id: tenantId,
    kind: s.kind,
    pool: s.kind === 'diag.wait' ? 'io' : 'short',
    queue: s.queue ?? null,
    input: s.input,
    run_at: s.runAt?.toISOString() ?? null,
    max_attempts: 10,
    session_id: null,
    quota: false,
    retry: false,
    base: 0,
  }));
  await db.query(sql.unsafe`select platform_enqueue(${sql.jsonb(records as never)})`);
  return records.map((r) => r.id);
}

/** The wake-ups of these jobs taken out of Graphile's queue, as its runner does once their attempt returned. */
const wakeUpsDone = (db: DatabasePool, ids: string[]) =>
  db.query(sql.unsafe`select graphile_worker.complete_jobs(array(
    select graphile_job_id from jobs where id = any(${sql.array(ids, 'uuid')}) and graphile_job_id is not null))`);

// A worker of 0052's time holding a serial queue's job, run in a process of
// its own that the test kills: a plain Graphile runner whose task claims the
// queue's next job with queue_claim; it finishes the first (input steps 1)
// as that worker recorded a result, and holds the next until it is killed.
const OLD_WORKER = `
import { run } from 'graphile-worker';
const runner = await run({
  connectionString: process.env.DATABASE_URL, concurrency: 1, noHandleSignals: true, pollInterval: 100,
  taskList: {
    'diag.steps': async (payload, helpers) => {
      const { rows: [c] } = await helpers.query(
        'select job_id, input, attempt from queue_claim($1::text[], $2::text[])', [[payload.queue], [helpers.job.locked_by]]);
      if (!c?.input) return;
      if (c.input.steps === 1) {
        await helpers.query(
          "update jobs set status = 'succeeded', result = $2::jsonb, error = null, finished_at = now(), attempts = $3 " +
            'where id = $1 and job_attempt_may_write(status, attempts, $3)',
          [c.job_id, JSON.stringify({ steps: 1, attempt: c.attempt }), c.attempt]);
        return;
      }
      process.stdout.write('holding ' + c.job_id + '\\n');
      await new Promise(() => {});
    },
  },
});
await runner.promise;
`;

/** Runs OLD_WORKER until it holds `jobId`, then SIGKILLs it: the job stays running, its wake-up locked. */
async function workerGoneWith(t: Test, databaseUrl: string, jobId: string): Promise<void> {
  const child = spawn(
    '/usr/bin/env',
    ['-u', 'NODE_OPTIONS', process.execPath, '--input-type=module', '-e', OLD_WORKER],
    {
      cwd: process.cwd(),
      env: { PATH: process.env.PATH ?? '', DATABASE_URL: databaseUrl },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  const exited = new Promise((resolve) => child.once('exit', resolve));
  t.teardown(() => void child.kill('SIGKILL'));
  let output = '';
  child.stderr.on('data', (d) => (output += d));
  await new Promise<void>((resolve, reject) => {
    child.stdout.on('data', (d) => String(d).includes(`holding ${jobId}`) && resolve());
    child.once('exit', (code) => reject(new Error(`the old worker exited (${code}): ${output}`)));
  });
  child.kill('SIGKILL');
  await exited;
}

const Row = z.object({ id: z.string(), row: z.record(z.string(), z.unknown()) });
/** Every job's row as stored (to_jsonb: whatever columns the schema has then). */
const rows = async (db: DatabasePool) =>
  new Map((await db.any(sql.type(Row)`select id, to_jsonb(j) as row from jobs j`)).map((r) => [r.id, r.row]));

/** Jobs in every state, written as at 0052; the ids by name (a: turns, b: another queue, n: no queue). */
async function jobsInEveryState(t: Test, db: DatabasePool, url: string) {
  const tenant = await db.oneFirst(
    sql.type(z.object({ id: z.string() }))`insert into tenants (name) values ('Upgraded') returning id`,
  );

  // A serial queue like a chat session's turns: one succeeded, one held by a worker that dies, two behind it.
  const turns = `chat:${randomUUID()}`;
  const [a1, a2, a3, a4] = await enqueue0052(
    db,
    tenant,
    [1, 2, 3, 4].map((steps) => ({ kind: 'diag.steps', queue: turns, input: { steps, delayMs: 10 } })),
  );
  await workerGoneWith(t, url, a2!);

  // Another queue: its head waits for its retry (not_before ahead), one behind it, one cancelled while queued.
  const replies = `replies:${randomUUID()}`;
  const [b1, b2, b3] = await enqueue0052(
    db,
    tenant,
    ['b1', 'b2', 'b3'].map((tag) => ({ kind: 'diag.noop', queue: replies, input: { tag } })),
  );
  const claimed = await db.oneFirst(
    sql.type(
      z.object({ outcome: z.string() }),
    )`select outcome from queue_claim(array[${replies}], array['old-worker'])`,
  );
  t.equal(claimed, 'claimed');
  const retryError = sql.jsonb({ code: 'diag_transient', message: 'Asked to fail attempt 1.', retrying: true });
  await db.query(sql.unsafe`select job_wait(${b1!}, 1, false, now() + interval '3 seconds', ${retryError}::jsonb,
    null::jsonb, false, 'old-worker', now(), false)`);
  await db.query(sql.unsafe`update jobs set status = 'cancelled', finished_at = now(), error = null
    where id = ${b3!} and status = 'queued'`);

  // Jobs of no queue: due, waiting (an attempt that waits), cancelling, succeeded, failed, cancelled.
  const [n1, n2, n3, n4, n5, n6] = await enqueue0052(
    db,
    tenant,
    ['n1', 'n2', 'n3', 'n4', 'n5', 'n6'].map((tag) => ({ kind: 'diag.noop', input: { tag } })),
  );
  await wakeUpsDone(db, [n2!]); // its attempt's wake-up, before the wait adds the next
  await db.query(sql.unsafe`select job_wait(${n2!}, 1, true, now() + interval '3 seconds', null::jsonb,
    null::jsonb, false, 'old-worker', now(), false)`);
  const running = (id: string) =>
    sql.unsafe`update jobs set status = 'running', attempts = 1, locked_by = 'old-worker', started_at = now()
      where id = ${id} and job_attempt_may_write(status, attempts, 1)`;
  await db.query(running(n3!));
  await db.query(sql.unsafe`update jobs set status = 'cancelling', finished_at = null, error = null where id = ${n3!}`);
  await db.query(sql.unsafe`update jobs set status = 'succeeded', result = '{"ok":true}', error = null,
    finished_at = now(), attempts = 1 where id = ${n4!}`);
  await db.query(running(n5!));
  await db.query(sql.unsafe`update jobs set status = 'failed', finished_at = now(),
    error = '{"code":"diag_failed","message":"Asked to fail permanently.","retrying":false}' where id = ${n5!}`);
  await db.query(sql.unsafe`update jobs set status = 'cancelled', finished_at = now(), error = null
    where id = ${n6!} and status = 'queued'`);
  await wakeUpsDone(db, [n4!, n5!, n6!]);

  return {
    a1: a1!,
    a2: a2!,
    a3: a3!,
    a4: a4!,
    b1: b1!,
    b2: b2!,
    b3: b3!,
    n1: n1!,
    n2: n2!,
    n3: n3!,
    n4: n4!,
    n5: n5!,
    n6: n6!,
  };
}

t.test('jobs in every state survive the upgrade past 0052 and finish', async (t) => {
  const url = await createDatabaseBefore(t, '0053');
  const db = await testPool(t, url);
  const { a1, a2, a3, a4, b1, b2, b3, n1, n2, n3, n4, n5, n6 } = await jobsInEveryState(t, db, url);
  const all = [a1, a2, a3, a4, b1, b2, b3, n1, n2, n3, n4, n5, n6];
  const before = await rows(db);
  t.same(
    all.map((id) => before.get(id)?.status),
    ['succeeded', 'running', 'queued', 'queued', 'queued', 'queued', 'cancelled'].concat([
      'queued',
      'queued',
      'cancelling',
      'succeeded',
      'failed',
      'cancelled',
    ]),
    'every state before the upgrade',
  );
  t.ok(before.get(b1)?.not_before && before.get(n2)?.not_before, 'two wait with a not_before');

  await migrate(url, testLogger());

  const after = await rows(db);
  for (const id of all) {
    const [was, is] = [before.get(id)!, after.get(id)];
    t.ok(is, `${id} is still there`);
    for (const column of ['status', 'kind', 'attempts', 'result', 'error', 'queue_name', 'tenant_id'])
      if (column in was && column in is!) t.same(is![column], was[column], `${was.kind} ${id}: ${column} kept`);
    // A later schema may keep the input elsewhere: then what the tasks return below shows it arrived.
    if ('input' in is!) t.same(is.input, was.input, `${id}: input kept`);
  }
  const finals = [a1, b3, n4, n5, n6];
  const byId = async (ids: string[]) => [...(await findJobsByIds(db, ids))].sort((x, y) => x.id.localeCompare(y.id));
  const finalBefore = await byId(finals);

  await startTestWorker(t, url);
  const ended = await waitFor(
    'every job to end',
    async () => {
      const jobs = await findJobsByIds(db, all);
      return jobs.every((j) => ['succeeded', 'failed', 'cancelled'].includes(j.status)) ? jobs : null;
    },
    60_000,
  );
  const job = (id: string) => ended.find((j) => j.id === id)!;
  t.same(await byId(finals), finalBefore, 'the final ones unchanged, version and all');

  t.same(job(a2).result, { steps: 2, attempt: 2 }, 'the dead worker’s job ran again, as its next attempt');
  t.same(job(a3).result, { steps: 3, attempt: 1 });
  t.same(job(a4).result, { steps: 4, attempt: 1 });
  t.same(job(b1).result, { ok: true }, 'the waiting head of a queue ran at its time');
  t.equal(job(b1).attempts, 2, 'its retry counted');
  t.equal(job(b2).status, 'succeeded');
  t.same([job(n1).status, job(n2).status, job(n3).status], ['succeeded', 'succeeded', 'cancelled']);
  t.equal(job(n2).attempts, 1, 'a wait keeps its attempt');

  // Serial order: each queued job of a queue started only after the one ahead ended.
  const at = (s: string | null) => Date.parse(s ?? '');
  for (const [ahead, next] of [
    [a2, a3],
    [a3, a4],
    [b1, b2],
  ] as const)
    t.ok(at(job(next).started_at) >= at(job(ahead).finished_at), `${next} started after ${ahead} ended`);
});
