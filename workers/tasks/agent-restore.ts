// agent.restore: hands a restored agent to its runner and waits until the
// runner acknowledges the work (it sees it on its next heartbeat). Waiting is
// a poll of one indexed row; past the timeout the attempt fails as retryable
// and Graphile Worker tries again with backoff while the work stays pending.
import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import { sql } from '../../core/db/pool.ts';
import { PermanentJobError, RetryableJobError } from '../../core/jobs/errors.ts';
import { defineTask } from '../define-task.ts';

const Input = z.object({
  managedAgentId: z.uuid(),
  workId: z.uuid(),
  timeoutMs: z.int().min(100).max(600_000).default(60_000),
  pollMs: z.int().min(50).max(10_000).default(500),
});

const Work = z.object({ state: z.enum(['pending', 'acknowledged', 'done']), runner_id: z.string(), acknowledged_at: z.string().nullable() });

export default defineTask('agent.restore', Input, async (input, ctx) => {
  const read = () =>
    ctx.db.maybeOne(sql.type(Work)`
      select state, runner_id, acknowledged_at from runner_work where id = ${input.workId} and tenant_id = ${ctx.tenantId}`);
  let work = await read();
  if (!work) throw new PermanentJobError('work_missing', 'The runner work of this restore no longer exists.');
  if (work.state === 'pending') {
    await ctx.progress({ state: 'waiting_for_runner', runnerId: work.runner_id, attempt: ctx.attempt });
    const deadline = Date.now() + input.timeoutMs;
    while (work.state === 'pending') {
      if (Date.now() >= deadline) {
        throw new RetryableJobError('runner_timeout', `The runner did not acknowledge the restore within ${Math.round(input.timeoutMs / 1000)} s.`);
      }
      await sleep(input.pollMs, undefined, { signal: ctx.signal });
      work = await read();
      if (!work) throw new PermanentJobError('work_missing', 'The runner work of this restore no longer exists.');
    }
  }
  await ctx.progress({ state: 'acknowledged', runnerId: work.runner_id });
  const result = { managedAgentId: input.managedAgentId, runnerId: work.runner_id, acknowledgedAt: work.acknowledged_at };
  // The work is marked done in the same commit as the job's success.
  await ctx.db.transaction(async (tx) => {
    await tx.query(sql.unsafe`update runner_work set state = 'done' where id = ${input.workId}`);
    await ctx.completeWithin(tx, result);
  });
  return result;
});
