// Reading a job always goes through the caller's identity: a job of a tenant
// the caller does not belong to reads exactly like a job that does not exist.
import { sql, type CommonQueryMethods } from '../db/pool.ts';
import { TenantRoleSchema, type TenantRole } from '../tenants/roles.ts';
import { JobRow } from './schema.ts';

const jobRow = sql.type(JobRow);

export async function findJobForUser(db: CommonQueryMethods, jobId: string, userId: string): Promise<JobRow | null> {
  return db.maybeOne(jobRow`
    select j.* from jobs j
    where j.id = ${jobId}
      and exists (select 1 from tenant_memberships m where m.tenant_id = j.tenant_id and m.user_id = ${userId})`);
}

/** The job and the caller's role in its tenant, when the caller is a member. */
export async function findJobWithRole(
  db: CommonQueryMethods,
  jobId: string,
  userId: string,
): Promise<{ job: JobRow; role: TenantRole } | null> {
  const row = await db.maybeOne(sql.type(JobRow.extend({ member_role: TenantRoleSchema }))`
    select j.*, m.role as member_role from jobs j
    join tenant_memberships m on m.tenant_id = j.tenant_id and m.user_id = ${userId}
    where j.id = ${jobId}`);
  if (!row) return null;
  const { member_role: role, ...job } = row;
  return { job, role };
}

export async function findJobInTenant(db: CommonQueryMethods, jobId: string, tenantId: string): Promise<JobRow | null> {
  return db.maybeOne(jobRow`select * from jobs where id = ${jobId} and tenant_id = ${tenantId}`);
}

/** Jobs by id, only the columns a status carries (not the input): the LISTEN hub re-reads changed jobs with it. */
export async function findJobsByIds(db: CommonQueryMethods, ids: readonly string[]): Promise<readonly JobRow[]> {
  if (ids.length === 0) return [];
  return db.any(jobRow`
    select id, tenant_id, kind, status, attempts, max_attempts, progress, result, error, version,
      created_at, started_at, finished_at, updated_at
    from jobs where id = any(${sql.array(ids, 'uuid')})`);
}
