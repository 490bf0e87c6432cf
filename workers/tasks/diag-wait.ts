// diag.wait: a job that waits like a model stream does (its time is spent on
// the outside world), run in the I/O pool. For tests and the bench of
// fairness and pool sizing. Operators only: see api/routes/tenants/index.ts.
import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import { defineTask } from '../define-task.ts';

const Input = z.object({ ms: z.int().min(0).max(600_000).default(1_000) });

export default defineTask('diag.wait', Input, async (input, ctx) => {
  await ctx.progress({ waitingMs: input.ms });
  await sleep(input.ms, undefined, { signal: ctx.signal });
  return { waitedMs: input.ms };
});
