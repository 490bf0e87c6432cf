// A worker process SIGKILLed in the middle of a job: the heartbeat goes
// stale, the sweep releases the job, another worker finishes it, and exactly
// one result is recorded.
import t from 'tap';
import { z } from 'zod';
import { sql } from '../../core/db/pool.ts';
import { createTestDatabase, testPool } from '../helpers/db.ts';
import { createMember, enqueue } from '../helpers/fixtures.ts';
import { waitFor } from '../helpers/wait.ts';
import { spawnWorkerProcess, startTestWorker } from '../helpers/worker.ts';

const databaseUrl = await createTestDatabase(t);
const db = await testPool(t, databaseUrl);
const member = await createMember(db);

const JobState = z.object({
  status: z.string(),
  attempts: z.number(),
  result: z.unknown().nullable(),
  locked_by: z.string().nullable(),
  graphile_jobs: z.number(),
});
const state = (jobId: string) =>
  db.one(sql.type(JobState)`
    select status, attempts, result, locked_by,
      (select count(*) from graphile_worker.jobs where task_identifier = 'diag.steps')::int as graphile_jobs
    from jobs where id = ${jobId}`);

t.test('the job of a SIGKILLed worker is finished by another worker within 60 s', async (t) => {
  const doomed = spawnWorkerProcess(t, databaseUrl, { WORKER_CONCURRENCY: '1' });
  const jobId = await enqueue(db, { kind: 'diag.steps', tenantId: member.tenantId, input: { steps: 8, delayMs: 250 } });

  const running = await waitFor(
    'the first attempt to run',
    async () => {
      const s = await state(jobId);
      return s.status === 'running' && s.locked_by ? s : null;
    },
    30_000,
  );
  t.equal(running.attempts, 1);

  doomed.child.kill('SIGKILL');
  await doomed.exited;
  const killedAt = Date.now();

  await startTestWorker(t, databaseUrl);
  const finished = await waitFor(
    'the job to succeed elsewhere',
    async () => {
      const s = await state(jobId);
      // Graphile deletes its own job just after our row records the success.
      return s.status === 'succeeded' && s.graphile_jobs === 0 ? s : null;
    },
    60_000,
  );
  const recoverySeconds = (Date.now() - killedAt) / 1000;
  t.ok(recoverySeconds < 60, `finished ${recoverySeconds.toFixed(1)} s after the kill`);
  t.equal(finished.attempts, 2, 'the second attempt finished it');
  t.same(finished.result, { steps: 8, attempt: 2 }, 'one result, from the attempt that finished');
  t.equal(finished.graphile_jobs, 0, 'the Graphile job is gone');

  const sweeps = await db.any(sql.type(z.object({ detail: z.unknown() }))`
    select detail from scheduled_job_runs where task = 'maintenance.dead_workers' and status = 'succeeded'`);
  t.ok(
    sweeps.some((s) => ((s.detail as { requeuedJobs: number }).requeuedJobs ?? 0) >= 1),
    'the sweep recorded the release',
  );
});
