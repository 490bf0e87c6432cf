// Diagnostic jobs (POST /api/tenants/jobs): check that api, database and
// workers are connected, watch progress, retries and waits. The operator
// runs them with the tasks' full bounds; a tenant Admin with small ones
// (seconds, not minutes; nothing that ignores a cancel) and at most
// TENANT_DIAG_OPEN_LIMIT unfinished across the account. Either way they are
// ordinary jobs: fair tags, the account's open-job limit, the same workers.
import { z } from 'zod';
import { sql, type DatabaseTransactionConnection } from '../db/pool.ts';
import { enqueueJob, type EnqueuedJob } from './enqueue.ts';

export const DIAG_KINDS = ['diag.noop', 'diag.steps', 'diag.wait'] as const;
export type DiagKind = (typeof DIAG_KINDS)[number];

/** The tasks' own inputs: the operator's bounds. */
export const DiagInputs = {
  'diag.noop': z.object({}).loose(),
  'diag.steps': z.object({
    steps: z.int().min(1).max(100).default(3),
    delayMs: z.int().min(0).max(60_000).default(50),
    failAttemptsBelow: z.int().min(0).max(100).default(0),
    /** With failAttemptsBelow: the Retry-After the failure carries (the next attempt's time). */
    retryAfterMs: z.int().min(0).max(600_000).optional(),
    failPermanently: z.boolean().default(false),
    ignoreCancel: z.boolean().default(false),
  }),
  'diag.wait': z.object({ ms: z.int().min(0).max(600_000).default(1_000) }),
} as const;

/** A tenant Admin's bounds: at most about 10 s of work, a few retries, always cancellable. */
export const TenantDiagInputs = {
  'diag.noop': z.strictObject({}),
  'diag.steps': z.strictObject({
    steps: z.int().min(1).max(10).default(3),
    delayMs: z.int().min(0).max(1_000).default(50),
    failAttemptsBelow: z.int().min(0).max(2).default(0),
    retryAfterMs: z.int().min(0).max(10_000).optional(),
    failPermanently: z.boolean().default(false),
  }),
  'diag.wait': z.strictObject({ ms: z.int().min(0).max(10_000).default(1_000) }),
} as const;

/** Unfinished diagnostic jobs one account's tenant Admins may have. */
export const TENANT_DIAG_OPEN_LIMIT = 5;

export class DiagLimitError extends Error {
  override name = 'DiagLimitError';
}

/**
 * Enqueues a diagnostic job in the caller's transaction. For a tenant Admin
 * the account's unfinished diagnostic jobs are counted under a lock of the
 * account, so racing requests cannot pass the limit together.
 */
export async function enqueueDiagJob(
  tx: DatabaseTransactionConnection,
  input: { tenantId: string; kind: DiagKind; input: Record<string, unknown>; operator: boolean },
): Promise<EnqueuedJob> {
  if (!input.operator) {
    const account = await tx.oneFirst(
      sql.type(z.object({ account_id: z.string() }))`select account_id from tenants where id = ${input.tenantId}`,
    );
    await tx.query(sql.unsafe`select pg_advisory_xact_lock(hashtextextended(${`diag-open:${account}`}, 0))`);
    const open = await tx.oneFirst(sql.type(z.object({ open: z.number() }))`
      select count(*)::int as open from jobs j join tenants t on t.id = j.tenant_id
      where t.account_id = ${account} and j.status in ('queued', 'running') and j.kind like 'diag.%'`);
    if (open >= TENANT_DIAG_OPEN_LIMIT) {
      throw new DiagLimitError(
        `This account has ${open} unfinished diagnostic jobs, the most a tenant Admin may have; wait for one to finish (GET /api/jobs/:jobId) or cancel one.`,
      );
    }
  }
  return enqueueJob(tx, { kind: input.kind, tenantId: input.tenantId, input: input.input, quota: true });
}
