// Suspend or resume a tenant by hand (abuse, an unpaid contract, a legal hold):
//   npm run tenant:suspend -- --tenant <tenant id> --reason "..."
//   npm run tenant:suspend -- --tenant <tenant id> --resume
// While suspended, the tenant's agents get 403 tenant_inactive on the Agent
// API and MCP and its people a platform 403 tenant_inactive; nothing is deleted.
import { userInfo } from 'node:os';
import { z } from 'zod';
import { commandLine, usageError } from '../core/process/command-line.ts';
import { loadConfigOrExit } from '../core/config.ts';
import { commandLogger } from './command-logger.ts';
import { exitWithError } from '../core/process/lifecycle.ts';
import { resumeTenant, suspendTenant } from '../core/tenants/suspension.ts';
import { openDatabase } from './database.ts';

const USAGE = `
usage: npm run tenant:suspend -- --tenant <tenant id> --reason "..."
       npm run tenant:suspend -- --tenant <tenant id> --resume
Suspends a tenant (its agents and people get 403 tenant_inactive; nothing is
deleted), or resumes it.`;
const values = commandLine(USAGE, {
  tenant: { type: 'string' },
  reason: { type: 'string' },
  resume: { type: 'boolean', default: false },
});
const config = loadConfigOrExit();
const logger = commandLogger('tenant-suspend');
try {
  const tenantId = z.uuid().safeParse(values.tenant);
  if (!tenantId.success) usageError(USAGE, '--tenant must be the tenant id (a UUID)');
  if (!values.resume && !(values.reason as string | undefined)?.trim())
    usageError(USAGE, '--reason is required to suspend (or pass --resume)');
  const { db, close } = await openDatabase(config, logger);
  try {
    const result = values.resume
      ? await resumeTenant(db, tenantId.data)
      : await suspendTenant(db, tenantId.data, `operator ${userInfo().username}: ${values.reason!.trim()}`);
    if (!result) throw new Error(`no tenant ${tenantId.data}`);
    // The sentence below is what a person reads; the log line is for LOG_LEVEL=info.
    logger.info({ tenantId: tenantId.data, suspended: Boolean(result.suspended_at) }, 'tenant suspension changed');
    process.stdout.write(
      result.suspended_at
        ? `tenant ${tenantId.data} is suspended since ${result.suspended_at}\n`
        : `tenant ${tenantId.data} is active\n`,
    );
  } finally {
    await close();
  }
} catch (error) {
  exitWithError(null, error);
}
