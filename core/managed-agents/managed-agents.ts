// Managed agents of a tenant: created and soft-deleted by tenant Admins (or
// by agents), restored through the Agent API. A restore is one transaction:
// the agent becomes active, an 'agent.restore' job is enqueued and the work
// is handed to a runner (runner_work), so all three commit or none does.
import { claimAgentSlot } from '../billing/entitlements.ts';
import { z } from 'zod';
import { sql, type CommonQueryMethods, type Transactor } from '../db/pool.ts';
import { enqueueJob } from '../jobs/enqueue.ts';
import { JOB_STATUSES, type JobState } from '../jobs/schema.ts';

export const AGENT_RESTORE_KIND = 'agent.restore';
export const MANAGED_AGENT_KINDS = ['standalone', 'authority'] as const;
export type ManagedAgentKind = (typeof MANAGED_AGENT_KINDS)[number];

export const ManagedAgentRow = z.object({
  id: z.string(),
  tenant_id: z.string(),
  name: z.string(),
  kind: z.enum(MANAGED_AGENT_KINDS),
  status: z.enum(['active', 'deleted']),
  deleted_at: z.string().nullable(),
  created_by_principal: z.string().nullable(),
  created_at: z.string(),
  restored_at: z.string().nullable(),
  runner_id: z.string().nullable(),
});
export type ManagedAgentRow = z.infer<typeof ManagedAgentRow>;
const row = sql.type(ManagedAgentRow);
const COLUMNS = sql.fragment`id, tenant_id, name, kind, status, deleted_at, created_by_principal, created_at, restored_at, runner_id`;

export async function createManagedAgent(
  db: CommonQueryMethods,
  input: { tenantId: string; name: string; kind: ManagedAgentKind; createdByPrincipal?: string | null },
): Promise<ManagedAgentRow> {
  return db.transaction(async (tx) => {
    await claimAgentSlot(tx, input.tenantId); // 402 agent_addon_required when every slot is taken
    return tx.one(row`
      insert into managed_agents (tenant_id, name, kind, created_by_principal)
      values (${input.tenantId}, ${input.name}, ${input.kind}, ${input.createdByPrincipal ?? null})
      returning ${COLUMNS}`);
  });
}

/** Soft delete: the row stays as a tombstone. Null when absent from the tenant. */
export async function deleteManagedAgent(
  db: CommonQueryMethods,
  tenantId: string,
  id: string,
): Promise<ManagedAgentRow | null> {
  const deleted = await db.maybeOne(row`
    update managed_agents set status = 'deleted', deleted_at = now()
    where id = ${id} and tenant_id = ${tenantId} and status = 'active'
    returning ${COLUMNS}`);
  return deleted ?? findManagedAgent(db, tenantId, id);
}

/** The agent in this tenant, or null: an id of another tenant reads as absent. */
export async function findManagedAgent(
  db: CommonQueryMethods,
  tenantId: string,
  id: string,
): Promise<ManagedAgentRow | null> {
  if (!z.uuid().safeParse(id).success) return null;
  return db.maybeOne(row`select ${COLUMNS} from managed_agents where id = ${id} and tenant_id = ${tenantId}`);
}

export type RestoreJob = { id: string; status: JobState };

/** The job of the agent's latest restore, if any. */
export async function latestRestoreJob(db: CommonQueryMethods, agentId: string): Promise<RestoreJob | null> {
  return db.maybeOne(sql.type(z.object({ id: z.string(), status: z.enum(JOB_STATUSES) }))`
    select j.id, j.status from runner_work w join jobs j on j.id = w.job_id
    where w.managed_agent_id = ${agentId} order by w.created_at desc limit 1`);
}

export type Restored = { agent: ManagedAgentRow; job: RestoreJob | null };

/**
 * Restores a deleted agent on the given runner. When another request restored
 * it first (the conditional update matches nothing) the agent is returned as
 * it is now with its latest restore job, and nothing is enqueued twice.
 */
export async function restoreManagedAgent(db: Transactor, agent: ManagedAgentRow, runnerId: string): Promise<Restored> {
  return db.transaction(async (tx) => {
    const restored = await tx.maybeOne(row`
      update managed_agents set status = 'active', deleted_at = null, restored_at = now(), runner_id = ${runnerId}
      where id = ${agent.id} and tenant_id = ${agent.tenant_id} and status = 'deleted'
      returning ${COLUMNS}`);
    if (!restored) {
      const current = await tx.one(row`select ${COLUMNS} from managed_agents where id = ${agent.id}`);
      return { agent: current, job: await latestRestoreJob(tx, agent.id) };
    }
    const workId = await tx.oneFirst(sql.type(z.object({ id: z.string() }))`select gen_random_uuid() as id`);
    const job = await enqueueJob(tx, {
      kind: AGENT_RESTORE_KIND,
      tenantId: agent.tenant_id,
      input: { managedAgentId: agent.id, workId },
      maxAttempts: 5,
    });
    await tx.query(sql.unsafe`
      insert into runner_work (id, tenant_id, runner_id, managed_agent_id, job_id)
      values (${workId}, ${agent.tenant_id}, ${runnerId}, ${agent.id}, ${job.id})`);
    return { agent: restored, job: { id: job.id, status: job.status } };
  });
}
