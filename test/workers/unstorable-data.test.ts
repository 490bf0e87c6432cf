import t from 'tap';
import { z } from 'zod';
import { sql } from '../../core/db/pool.ts';
import { PermanentJobError, RetryableJobError } from '../../core/jobs/errors.ts';
import type { AttemptOutcome } from '../../core/metrics.ts';
import { runAttempt } from '../../workers/attempt.ts';
import type { PlatformTask, TaskContext } from '../../workers/define-task.ts';
import { testLogger } from '../helpers/config.ts';
import { createTestDatabase, testPool } from '../helpers/db.ts';
import { createMember, enqueue } from '../helpers/fixtures.ts';
import { attemptDeps } from '../helpers/worker.ts';

const databaseUrl = await createTestDatabase(t);
const db = await testPool(t, databaseUrl);
const logger = testLogger('worker');
const outcomes: AttemptOutcome[] = [];
const { deps, helpers, completions } = attemptDeps(
  t,
  db,
  databaseUrl,
  logger,
  (_kind, outcome) => void outcomes.push(outcome),
);
const member = await createMember(db);

const JobRow = z.object({ status: z.string(), attempts: z.number(), error: z.unknown() });

/** One attempt (the first of 3) of a job whose handler is `run`; the job's row after it. */
async function attemptOnce(run: (ctx: TaskContext) => Promise<unknown>) {
  // Far in the future: nothing but this test runs it.
  const jobId = await enqueue(db, {
    kind: 'diag.noop',
    tenantId: member.tenantId,
    maxAttempts: 3,
    runAt: new Date(Date.now() + 3_600_000),
  });
  const task: PlatformTask = { kind: 'diag.noop', input: z.unknown(), run: (_input, ctx) => run(ctx) };
  const job = { jobId, tenantId: member.tenantId, kind: task.kind, input: {}, attempt: 1, maxAttempts: 3 };
  await runAttempt(task, job, deps, helpers);
  await completions.drain();
  return db.one(sql.type(JobRow)`select status, attempts, error from jobs where id = ${jobId}`);
}

const unstorable = { status: 'failed', attempts: 1, error: { code: 'unstorable_data', retrying: false } };

t.test('a NUL written to text fails the job at once', async (t) => {
  const row = await attemptOnce((ctx) => ctx.db.query(sql.unsafe`select ${'before\u0000after'}::text`));
  t.match(row, unstorable);
  t.match(row.error, { message: /SQLSTATE 22021/ });
});

t.test('a lone surrogate written to jsonb fails the job at once', async (t) => {
  // slonik reports PostgreSQL's 22P02 as its InvalidInputError, without the code.
  const row = await attemptOnce((ctx) => ctx.db.query(sql.unsafe`select ${'"half \\ud800 pair"'}::jsonb`));
  t.match(row, unstorable);
});

t.test('a NUL in jsonb fails the job at once', async (t) => {
  const row = await attemptOnce((ctx) => ctx.db.query(sql.unsafe`select ${'{"a":"\\u0000"}'}::jsonb`));
  t.match(row, unstorable);
  t.match(row.error, { message: /SQLSTATE 22P05/ });
});

t.test('a result the database refuses fails the job instead of running it again', async (t) => {
  const row = await attemptOnce(async () => ({ text: 'before\u0000after' }));
  t.match(row, unstorable);
});

t.test('any other failure is still retried', async (t) => {
  const row = await attemptOnce(async () => {
    throw new Error('something else');
  });
  t.match(row, { status: 'queued', error: { code: 'task_failed', retrying: true } });
  t.same(outcomes, ['failed', 'failed', 'failed', 'succeeded', 'failed'], 'the result failed after the attempt');
});

t.test(
  "a failure's message quoting outside text is stored mended, whether it ends the job or retries it",
  async (t) => {
    const quoted = 'the channel said: before\u0000after, half \ud800 pair';
    const final = await attemptOnce(async () => {
      throw new PermanentJobError('channel_refused', quoted);
    });
    t.match(final, { status: 'failed', attempts: 1, error: { code: 'channel_refused', retrying: false } });
    t.equal((final.error as { message: string }).message, 'the channel said: beforeafter, half \ufffd pair');
    const retried = await attemptOnce(async () => {
      throw new RetryableJobError('channel_busy', quoted);
    });
    t.match(retried, { status: 'queued', attempts: 1, error: { code: 'channel_busy', retrying: true } });
    t.equal((retried.error as { message: string }).message, 'the channel said: beforeafter, half \ufffd pair');
  },
);
