// What an operator may do from the console. Each action and its audit row
// commit in one transaction, so there is never an effect without its record
// nor a record of something that did not happen.
import { z } from 'zod';
import { sql, type DatabasePool, type DatabaseTransactionConnection } from '../db/pool.ts';
import { enqueueJob } from '../jobs/enqueue.ts';
import { requestCancel } from '../jobs/lifecycle.ts';
import { resumeTenant, suspendTenant } from '../tenants/suspension.ts';
import { recordAction, type Operator } from './audit.ts';

export type ActionOutcome = { ok: true; outcome: string } | { ok: false; status: 404 | 409; message: string };

/** How many attempts a retried job gets (with the usual backoff between them). */
export const RETRY_ATTEMPTS = 3;

const Locked = z.object({
  id: z.string(),
  tenant_id: z.string(),
  kind: z.string(),
  status: z.string(),
  queue_name: z.string().nullable(),
  attempts: z.number(),
  input: z.record(z.string(), z.unknown()).nullable(),
});

/**
 * Runs a failed job again, through the one way jobs are queued
 * (core/jobs/enqueue.ts): its own input, numbered on from its last attempt
 * (so the attempt fencing of core/jobs/lifecycle.ts holds and its history
 * reads on), a place in its account's fair order, after the jobs already in
 * its serial queue, and the job back to 'queued'.
 */
export async function retryJob(
  db: DatabasePool,
  operator: Operator,
  jobId: string,
  reason: string,
): Promise<ActionOutcome> {
  return db.transaction((tx) => retryJobIn(tx, operator, jobId, reason));
}

/** retryJob inside the caller's transaction (a bulk retry runs many in one). */
export async function retryJobIn(
  tx: DatabaseTransactionConnection,
  operator: Operator,
  jobId: string,
  reason: string,
): Promise<ActionOutcome> {
  const job = await tx.maybeOne(sql.type(Locked)`
    select id, tenant_id, kind, status, queue_name, attempts, input from jobs where id = ${jobId} for update`);
  if (!job) return { ok: false, status: 404, message: 'There is no such job (it may have been removed by retention).' };
  if (job.status !== 'failed')
    return { ok: false, status: 409, message: `Only a failed job can be retried; this one is ${job.status}.` };
  if (!job.input)
    return {
      ok: false,
      status: 409,
      message: 'This job failed before its input was kept for retries; it cannot be run again from here.',
    };
  await enqueueJob(tx, {
    id: job.id,
    kind: job.kind,
    tenantId: job.tenant_id,
    input: job.input,
    maxAttempts: job.attempts + RETRY_ATTEMPTS,
    again: { afterAttempts: job.attempts },
    ...(job.queue_name ? { queueName: job.queue_name } : {}),
  });
  await tx.query(
    sql.unsafe`insert into job_history (job_id, event, attempt) values (${jobId}, 'queued', ${job.attempts})`,
  );
  const outcome = `queued again as attempt ${job.attempts + 1} (up to ${RETRY_ATTEMPTS} attempts)`;
  await recordAction(tx, operator, { action: 'job.retry', tenantId: job.tenant_id, jobId, reason, outcome });
  return { ok: true, outcome };
}

/** Cancels a queued job at once, or asks the worker running it to stop (core/jobs/lifecycle.ts requestCancel). */
export async function cancelJob(
  db: DatabasePool,
  operator: Operator,
  jobId: string,
  reason: string,
): Promise<ActionOutcome> {
  return db.transaction((tx) => cancelJobIn(tx, operator, jobId, reason));
}

/** cancelJob inside the caller's transaction. */
export async function cancelJobIn(
  tx: DatabaseTransactionConnection,
  operator: Operator,
  jobId: string,
  reason: string,
): Promise<ActionOutcome> {
  const before = await tx.maybeOne(sql.type(z.object({ tenant_id: z.string(), status: z.string() }))`
    select tenant_id, status from jobs where id = ${jobId} for update`);
  if (!before)
    return { ok: false, status: 404, message: 'There is no such job (it may have been removed by retention).' };
  const row = await requestCancel(tx, jobId);
  if (!row)
    return {
      ok: false,
      status: 409,
      message: `Only a queued or running job can be cancelled; this one is ${before.status}.`,
    };
  const outcome = row.status === 'cancelled' ? 'cancelled before it ran' : 'its worker was asked to stop it';
  await recordAction(tx, operator, { action: 'job.cancel', tenantId: before.tenant_id, jobId, reason, outcome });
  return { ok: true, outcome };
}

export async function setTenantSuspended(
  db: DatabasePool,
  operator: Operator,
  tenantId: string,
  suspend: boolean,
  reason: string,
): Promise<ActionOutcome> {
  return db.transaction(async (tx) => {
    const before = await tx.maybeOne(sql.type(z.object({ suspended: z.boolean() }))`
      select suspended_at is not null as suspended from tenants where id = ${tenantId} for update`);
    if (!before) return { ok: false, status: 404, message: 'There is no such tenant.' };
    if (before.suspended === suspend)
      return {
        ok: false,
        status: 409,
        message: suspend ? 'This tenant is already suspended.' : 'This tenant is not suspended.',
      };
    if (suspend) await suspendTenant(tx, tenantId, `operator ${operator.email}: ${reason}`);
    else await resumeTenant(tx, tenantId);
    const outcome = suspend ? 'suspended: its people and agents are refused (403 tenant_inactive)' : 'resumed';
    await recordAction(tx, operator, {
      action: suspend ? 'tenant.suspend' : 'tenant.resume',
      tenantId,
      jobId: null,
      reason,
      outcome,
    });
    return { ok: true, outcome };
  });
}
