// diag.steps: a job with visible progress, for operators and tests. It walks
// `steps` steps of `delayMs` each, publishing progress, and can be told to
// fail its first attempts (transiently), fail for good, or ignore being
// cancelled (to see the worker cut it off). Operators only: see
// api/routes/tenants/index.ts.
import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import { PermanentJobError, RetryableJobError } from '../../core/jobs/errors.ts';
import { defineTask } from '../define-task.ts';

const Input = z.object({
  steps: z.int().min(1).max(100).default(3),
  delayMs: z.int().min(0).max(60_000).default(50),
  failAttemptsBelow: z.int().min(0).max(100).default(0),
  /** With failAttemptsBelow: the Retry-After the failure carries (the next attempt's time). */
  retryAfterMs: z.int().min(0).max(600_000).optional(),
  failPermanently: z.boolean().default(false),
  ignoreCancel: z.boolean().default(false),
});

export default defineTask('diag.steps', Input, async (input, ctx) => {
  if (input.failPermanently) throw new PermanentJobError('diag_failed', 'Asked to fail permanently.');
  if (ctx.attempt < input.failAttemptsBelow) throw new RetryableJobError('diag_transient', `Asked to fail attempt ${ctx.attempt}.`, input.retryAfterMs);
  for (let step = 1; step <= input.steps; step++) {
    await sleep(input.delayMs, undefined, input.ignoreCancel ? {} : { signal: ctx.signal });
    await ctx.progress({ step, of: input.steps });
  }
  return { steps: input.steps, attempt: ctx.attempt };
});
