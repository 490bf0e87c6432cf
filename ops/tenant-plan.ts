// Set a tenant's plan by hand (a contract, a trial, support):
//   npm run tenant:plan -- --tenant <tenant id> --plan pro|enterprise|free [--until 2027-12-31] [--reason "..."]
// Writes the tenant's 'operator' entitlement and recomputes the plan like any
// other change (recorded in billing_changes with the reason). --plan free
// removes the operator's grant; a paid Stripe or in-app plan stays in force.
import { userInfo } from 'node:os';
import { z } from 'zod';
import { commandLine, usageError } from '../core/process/command-line.ts';
import { removeEntitlement, setEntitlement } from '../core/billing/entitlements.ts';
import { loadConfigOrExit } from '../core/config.ts';
import { sql } from '../core/db/pool.ts';
import { commandLogger } from './command-logger.ts';
import { PLAN_NAMES, type PlanName } from '../core/plans.ts';
import { exitWithError } from '../core/process/lifecycle.ts';
import { openDatabase } from './database.ts';

const USAGE = `
usage: npm run tenant:plan -- --tenant <tenant id> --plan free|pro|enterprise [--until 2027-12-31] [--reason "..."]
Sets a tenant's plan by hand (the operator's grant); --plan free removes the
grant (a paid Stripe or in-app plan stays). A person's tenants and their ids:
GET /api/tenants/ with their token.`;
const values = commandLine(USAGE, {
  tenant: { type: 'string' },
  plan: { type: 'string' },
  until: { type: 'string' },
  reason: { type: 'string' },
});
const config = loadConfigOrExit();
const logger = commandLogger('tenant-plan');
try {
  const tenantId = z.uuid().safeParse(values.tenant);
  if (!tenantId.success) usageError(USAGE, '--tenant must be the tenant id (a UUID)');
  if (!PLAN_NAMES.includes(values.plan as PlanName))
    usageError(USAGE, `--plan must be one of ${PLAN_NAMES.join(', ')}`);
  const plan = values.plan as PlanName;
  const until = values.until ? new Date(values.until) : null;
  if (until && (Number.isNaN(until.getTime()) || until <= new Date()))
    usageError(USAGE, '--until must be a future date, e.g. 2027-12-31');
  const reason = `operator ${userInfo().username}: ${values.reason ?? `set plan to ${plan}`}`.slice(0, 500);

  const { db, close } = await openDatabase(config, logger);
  try {
    const result = await db.transaction(async (tx) => {
      const exists = await tx.exists(sql.unsafe`select 1 from tenants where id = ${tenantId.data}`);
      if (!exists) throw new Error(`no tenant ${tenantId.data}`);
      if (plan === 'free') await removeEntitlement(tx, tenantId.data, 'operator', reason);
      else
        await setEntitlement(
          tx,
          { tenantId: tenantId.data, source: 'operator', plan, status: 'active', expiresAt: until },
          reason,
        );
      return tx.one(sql.type(z.object({ plan: z.string(), plan_source: z.string().nullable() }))`
        select plan, plan_source from tenants where id = ${tenantId.data}`);
    });
    process.stdout.write(
      `tenant ${tenantId.data} is now on the ${result.plan} plan${result.plan_source ? ` (from ${result.plan_source})` : ''}\n`,
    );
  } finally {
    await close();
  }
} catch (error) {
  exitWithError(null, error);
}
