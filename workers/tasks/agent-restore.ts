// agent.restore: hands a restored agent to its runner and waits until the
// runner acknowledges the work (it sees it on its next heartbeat). The wait
// does not hold a worker slot: the attempt looks briefly, then waits parked
// (JobWait, core/jobs/park.ts) and looks again, at growing intervals. Past
// the timeout the attempt fails as retryable and a later attempt waits again
// while the work stays pending.
import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import { sql } from '../../core/db/pool.ts';
import { JobWait, PermanentJobError, RetryableJobError } from '../../core/jobs/errors.ts';
import { defineTask } from '../define-task.ts';

const Input = z.object({
  managedAgentId: z.uuid(),
  workId: z.uuid(),
  timeoutMs: z.int().min(100).max(600_000).default(60_000),
  pollMs: z.int().min(50).max(10_000).default(500),
});

const Work = z.object({
  state: z.enum(['pending', 'acknowledged', 'done']),
  runner_id: z.string(),
  acknowledged_at: z.string().nullable(),
});
const Waiting = z.object({
  state: z.literal('waiting_for_runner'),
  attempt: z.number(),
  since: z.string(),
  checks: z.number(),
});

/** Looks in the slot this long before the attempt waits parked. */
const IN_SLOT_MS = 1_000;
/** The longest pause between two looks while parked. */
const MAX_PAUSE_MS = 5_000;

export default defineTask('agent.restore', Input, async (input, ctx) => {
  const read = () =>
    ctx.db.maybeOne(sql.type(Work)`
      select state, runner_id, acknowledged_at from runner_work where id = ${input.workId} and tenant_id = ${ctx.tenantId}`);
  let work = await read();
  if (!work) throw new PermanentJobError('work_missing', 'The runner work of this restore no longer exists.');
  if (work.state === 'pending') {
    // This attempt may have waited parked before: its progress says since when.
    const progress = await ctx.db.maybeOneFirst(
      sql.type(z.object({ progress: z.unknown() }))`select progress from jobs where id = ${ctx.jobId}`,
    );
    const before = Waiting.safeParse(progress);
    const waiting =
      before.success && before.data.attempt === ctx.attempt
        ? before.data
        : { state: 'waiting_for_runner' as const, attempt: ctx.attempt, since: new Date().toISOString(), checks: 0 };
    if (!before.success) await ctx.progress({ ...waiting, runnerId: work.runner_id });
    const deadline = new Date(waiting.since).getTime() + input.timeoutMs;
    const inSlotUntil = Math.min(deadline, Date.now() + IN_SLOT_MS);
    while (work.state === 'pending' && Date.now() < inSlotUntil) {
      await sleep(Math.min(input.pollMs, Math.max(0, inSlotUntil - Date.now())), undefined, { signal: ctx.signal });
      work = await read();
      if (!work) throw new PermanentJobError('work_missing', 'The runner work of this restore no longer exists.');
    }
    if (work.state === 'pending') {
      if (Date.now() >= deadline) {
        throw new RetryableJobError(
          'runner_timeout',
          `The runner did not acknowledge the restore within ${Math.round(input.timeoutMs / 1000)} s.`,
        );
      }
      const pause = Math.min(MAX_PAUSE_MS, input.pollMs * 2 ** Math.min(waiting.checks, 8), deadline - Date.now());
      throw new JobWait(pause, 'waiting for the runner to acknowledge the restore', {
        ...waiting,
        checks: waiting.checks + 1,
        runnerId: work.runner_id,
      });
    }
  }
  await ctx.progress({ state: 'acknowledged', runnerId: work.runner_id });
  const result = {
    managedAgentId: input.managedAgentId,
    runnerId: work.runner_id,
    acknowledgedAt: work.acknowledged_at,
  };
  // The work is marked done in the same commit as the job's success.
  await ctx.db.transaction(async (tx) => {
    await tx.query(sql.unsafe`update runner_work set state = 'done' where id = ${input.workId}`);
    await ctx.completeWithin(tx, result);
  });
  return result;
});
