// diag.wait: a job that waits like a model stream does (its time is spent on
// the outside world), run in the I/O pool. For tests and the bench of
// fairness and pool sizing. Bounds: core/jobs/diagnostics.ts.
import { setTimeout as sleep } from 'node:timers/promises';
import { DiagInputs } from '../../core/jobs/diagnostics.ts';
import { defineTask } from '../define-task.ts';

const Input = DiagInputs['diag.wait'];

export default defineTask('diag.wait', Input, async (input, ctx) => {
  await ctx.progress({ waitingMs: input.ms });
  await sleep(input.ms, undefined, { signal: ctx.signal });
  return { waitedMs: input.ms };
});
