// company.run: one company task carried out by one company agent
// (core/companies/execute.ts); its output is written once, keyed by the job.
import { RunInput, runCompanyTask } from '../../core/companies/execute.ts';
import { Keyring } from '../../core/crypto/keyring.ts';
import { defineTask } from '../define-task.ts';

export default defineTask('company.run', RunInput, async (input, ctx) =>
  runCompanyTask(input, { ...ctx, keyring: Keyring.fromConfig(ctx.config) }),
);
