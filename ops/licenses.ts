// Dashboard licenses from the command line:
//   npm run license:create -- --email buyer@example.com [--plan pro|enterprise] [--expires 2027-12-31] [--feature x --feature -y]
// Prints the license key once; only its hash is stored.
import { AccountEmail } from '../core/accounts/email.ts';
import { commandLine, usageError } from '../core/process/command-line.ts';
import { loadConfigOrExit } from '../core/config.ts';
import { createLicense, FEATURE_ADJUSTMENT, PLANS, type Plan } from '../core/dashboard/licenses.ts';
import { commandLogger } from './command-logger.ts';
import { exitWithError } from '../core/process/lifecycle.ts';
import { openDatabase } from './database.ts';

const USAGE = `
usage: npm run license:create -- --email <purchaser e-mail> [--plan pro|enterprise] [--expires 2027-12-31] [--feature <name> --feature -<name> ...]
Creates a dashboard license and prints its key once (only its hash is stored).`;
const values = commandLine(USAGE, {
  email: { type: 'string' },
  plan: { type: 'string', default: 'pro' },
  expires: { type: 'string' },
  feature: { type: 'string', multiple: true, default: [] },
});
const config = loadConfigOrExit();
const logger = commandLogger('licenses');
try {
  const email = AccountEmail.safeParse(values.email);
  if (!email.success) usageError(USAGE, '--email must be the purchaser e-mail address');
  if (!PLANS.includes(values.plan as Plan)) usageError(USAGE, `--plan must be one of ${PLANS.join(', ')}`);
  const expiresAt = values.expires ? new Date(values.expires) : undefined;
  if (expiresAt && Number.isNaN(expiresAt.getTime())) usageError(USAGE, '--expires must be a date, e.g. 2027-12-31');
  const bad = (values.feature as string[]).find((f) => !FEATURE_ADJUSTMENT.test(f));
  if (bad) usageError(USAGE, `--feature ${bad}: use a feature name to add, or -name to remove`);
  const { db, close } = await openDatabase(config, logger);
  try {
    const license = await createLicense(db, {
      purchaserEmail: email.data,
      plan: values.plan as Plan,
      features: values.feature,
      expiresAt,
    });
    process.stdout.write(
      `created ${values.plan} license ${license.id} for ${email.data}\nlicense key (shown once): ${license.key}\n`,
    );
  } finally {
    await close();
  }
} catch (error) {
  exitWithError(null, error);
}
