// Suspend or resume a tenant by hand (abuse, an unpaid contract, a legal hold):
//   node --import tsx ops/tenant-suspend.ts --tenant <tenant id> --reason "..."
//   node --import tsx ops/tenant-suspend.ts --tenant <tenant id> --resume
// While suspended, the tenant's agents get 403 tenant_inactive on the Agent
// API and MCP and its people a platform 403 tenant_inactive; nothing is deleted.
import { userInfo } from 'node:os';
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { loadConfigOrExit } from '../core/config.ts';
import { createLogger } from '../core/logger.ts';
import { exitWithError } from '../core/process/lifecycle.ts';
import { resumeTenant, suspendTenant } from '../core/tenants/suspension.ts';
import { openDatabase } from './database.ts';

const config = loadConfigOrExit();
const logger = createLogger(process.env.LOG_LEVEL ?? 'warn', 'tenant-suspend');
try {
  const { values } = parseArgs({
    options: { tenant: { type: 'string' }, reason: { type: 'string' }, resume: { type: 'boolean', default: false } },
    strict: true,
  });
  const tenantId = z.uuid().safeParse(values.tenant);
  if (!tenantId.success) throw new Error('--tenant must be the tenant id (a UUID)');
  if (!values.resume && !values.reason?.trim()) throw new Error('--reason is required to suspend (or pass --resume)');
  const { db, close } = await openDatabase(config, logger);
  try {
    const result = values.resume
      ? await resumeTenant(db, tenantId.data)
      : await suspendTenant(db, tenantId.data, `operator ${userInfo().username}: ${values.reason!.trim()}`);
    if (!result) throw new Error(`no tenant ${tenantId.data}`);
    logger.warn({ tenantId: tenantId.data, suspended: Boolean(result.suspended_at) }, 'tenant suspension changed');
    process.stdout.write(result.suspended_at ? `tenant ${tenantId.data} is suspended since ${result.suspended_at}\n` : `tenant ${tenantId.data} is active\n`);
  } finally {
    await close();
  }
} catch (error) {
  exitWithError(null, error);
}
