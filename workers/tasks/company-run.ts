// company.run: one company task carried out by one company agent
// (core/companies/execute.ts); its output is written once, keyed by the job.
import { RunInput, runCompanyTask } from '../../core/companies/execute.ts';
import { Keyring } from '../../core/crypto/keyring.ts';
import { defineTask } from '../define-task.ts';

export default defineTask('company.run', RunInput, async (input, ctx) =>
  runCompanyTask(input, {
    db: ctx.db,
    config: ctx.config,
    keyring: Keyring.fromConfig(ctx.config),
    jobId: ctx.jobId,
    tenantId: ctx.tenantId,
    signal: ctx.signal,
    progress: ctx.progress,
    completeWithin: ctx.completeWithin,
  }),
);
