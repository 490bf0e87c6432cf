// diag.steps: a job with visible progress, for operators and tests. It walks
// `steps` steps of `delayMs` each, publishing progress, and can be told to
// fail its first attempts (transiently), fail for good, or ignore being
// cancelled (to see the worker cut it off). Bounds: core/jobs/diagnostics.ts
// (a tenant Admin's are smaller than the operator's).
import { setTimeout as sleep } from 'node:timers/promises';
import { DiagInputs } from '../../core/jobs/diagnostics.ts';
import { PermanentJobError, RetryableJobError } from '../../core/jobs/errors.ts';
import { defineTask } from '../define-task.ts';

const Input = DiagInputs['diag.steps'];

export default defineTask('diag.steps', Input, async (input, ctx) => {
  if (input.failPermanently) throw new PermanentJobError('diag_failed', 'Asked to fail permanently.');
  if (ctx.attempt < input.failAttemptsBelow)
    throw new RetryableJobError('diag_transient', `Asked to fail attempt ${ctx.attempt}.`, input.retryAfterMs);
  for (let step = 1; step <= input.steps; step++) {
    await sleep(input.delayMs, undefined, input.ignoreCancel ? {} : { signal: ctx.signal });
    await ctx.progress({ step, of: input.steps });
  }
  return { steps: input.steps, attempt: ctx.attempt };
});
