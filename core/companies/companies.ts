// Companies, their configured agents and their tasks. Every query is scoped
// by the tenant the caller acts in; an id of another tenant reads exactly
// like one that does not exist. Writes are for tenant Admins (the routes
// check the role); reads serve both the platform and the Agent API.
import { claimAgentSlot } from '../billing/entitlements.ts';
import { z } from 'zod';
import { sql, type CommonQueryMethods } from '../db/pool.ts';
import { OFFLINE_MODEL } from '../plans.ts';
import { keysetPage, setClause, isUuid } from './paging.ts';

export const CompanyRow = z.object({
  id: z.string(),
  name: z.string(),
  description: z.string(),
  created_at: z.string(),
  updated_at: z.string(),
});
export type CompanyRow = z.infer<typeof CompanyRow>;
const COMPANY_COLUMNS = sql.fragment`id, name, description, created_at, updated_at`;

export const CompanyAgentRow = z.object({
  id: z.string(),
  company_id: z.string(),
  name: z.string(),
  role: z.string(),
  model: z.string(),
  status: z.enum(['active', 'paused']),
  created_at: z.string(),
  updated_at: z.string(),
});
export type CompanyAgentRow = z.infer<typeof CompanyAgentRow>;
const AGENT_COLUMNS = sql.fragment`id, company_id, name, role, model, status, created_at, updated_at`;

export const TASK_STATUSES = ['open', 'in_progress', 'done', 'cancelled'] as const;
export const CompanyTaskRow = z.object({
  id: z.string(),
  company_id: z.string(),
  title: z.string(),
  description: z.string(),
  status: z.enum(TASK_STATUSES),
  assigned_agent_id: z.string().nullable(),
  created_at: z.string(),
  updated_at: z.string(),
});
export type CompanyTaskRow = z.infer<typeof CompanyTaskRow>;
const TASK_COLUMNS = sql.fragment`id, company_id, title, description, status, assigned_agent_id, created_at, updated_at`;

/** A referenced company agent is absent or belongs to another company. */
export class UnknownCompanyAgentError extends Error {
  override name = 'UnknownCompanyAgentError';
}

// ---- companies ----

export async function createCompany(
  db: CommonQueryMethods,
  tenantId: string,
  userId: string | null,
  input: { name: string; description?: string | undefined },
) {
  return db.one(sql.type(CompanyRow)`
    insert into companies (tenant_id, name, description, created_by)
    values (${tenantId}, ${input.name}, ${input.description ?? ''}, ${userId})
    returning ${COMPANY_COLUMNS}`);
}

export async function listCompanies(db: CommonQueryMethods, tenantId: string, limit: number, cursor?: string) {
  return keysetPage(db, CompanyRow, {
    table: 'companies',
    columns: COMPANY_COLUMNS,
    where: sql.fragment`tenant_id = ${tenantId}`,
    limit,
    cursor,
  });
}

export async function findCompany(
  db: CommonQueryMethods,
  tenantId: string,
  companyId: string,
): Promise<CompanyRow | null> {
  if (!isUuid(companyId)) return null;
  return db.maybeOne(
    sql.type(CompanyRow)`select ${COMPANY_COLUMNS} from companies where id = ${companyId} and tenant_id = ${tenantId}`,
  );
}

export async function updateCompany(
  db: CommonQueryMethods,
  tenantId: string,
  companyId: string,
  patch: { name?: string | undefined; description?: string | undefined },
): Promise<CompanyRow | null> {
  if (!isUuid(companyId)) return null;
  return db.maybeOne(sql.type(CompanyRow)`
    update companies set ${setClause(patch)}
    where id = ${companyId} and tenant_id = ${tenantId}
    returning ${COMPANY_COLUMNS}`);
}

/** Deletes the company with its agents, tasks and runs (the jobs stay, as history). */
export async function deleteCompany(db: CommonQueryMethods, tenantId: string, companyId: string): Promise<boolean> {
  if (!isUuid(companyId)) return false;
  const result = await db.query(sql.unsafe`delete from companies where id = ${companyId} and tenant_id = ${tenantId}`);
  return result.rowCount === 1;
}

// ---- company agents ----

export type NewCompanyAgent = {
  name: string;
  role?: string | undefined;
  model?: string | undefined;
  status?: 'active' | 'paused' | undefined;
};

/** Null when the company is not the tenant's. */
export async function createCompanyAgent(
  db: CommonQueryMethods,
  tenantId: string,
  companyId: string,
  input: NewCompanyAgent,
): Promise<CompanyAgentRow | null> {
  if (!isUuid(companyId)) return null;
  return db.transaction(async (tx) => {
    // Another tenant's company is 404 before any question of slots.
    const owned = await tx.exists(
      sql.unsafe`select 1 from companies where id = ${companyId} and tenant_id = ${tenantId}`,
    );
    if (!owned) return null;
    await claimAgentSlot(tx, tenantId);
    // insert ... select: the row exists only if the company is the tenant's.
    return tx.maybeOne(sql.type(CompanyAgentRow)`
      insert into company_agents (tenant_id, company_id, name, role, model, status)
      select tenant_id, id, ${input.name}, ${input.role ?? ''}, ${input.model ?? OFFLINE_MODEL}, ${input.status ?? 'active'}
      from companies where id = ${companyId} and tenant_id = ${tenantId}
      returning ${AGENT_COLUMNS}`);
  });
}

export async function listCompanyAgents(
  db: CommonQueryMethods,
  tenantId: string,
  companyId: string,
  limit: number,
  cursor?: string,
) {
  return keysetPage(db, CompanyAgentRow, {
    table: 'company_agents',
    columns: AGENT_COLUMNS,
    where: sql.fragment`tenant_id = ${tenantId} and company_id = ${companyId}`,
    limit,
    cursor,
  });
}

export async function findCompanyAgent(
  db: CommonQueryMethods,
  tenantId: string,
  companyId: string,
  agentId: string,
): Promise<CompanyAgentRow | null> {
  if (!isUuid(companyId) || !isUuid(agentId)) return null;
  return db.maybeOne(sql.type(CompanyAgentRow)`
    select ${AGENT_COLUMNS} from company_agents where id = ${agentId} and company_id = ${companyId} and tenant_id = ${tenantId}`);
}

export async function updateCompanyAgent(
  db: CommonQueryMethods,
  tenantId: string,
  companyId: string,
  agentId: string,
  patch: Partial<NewCompanyAgent>,
): Promise<CompanyAgentRow | null> {
  if (!isUuid(companyId) || !isUuid(agentId)) return null;
  return db.maybeOne(sql.type(CompanyAgentRow)`
    update company_agents set ${setClause(patch)}
    where id = ${agentId} and company_id = ${companyId} and tenant_id = ${tenantId}
    returning ${AGENT_COLUMNS}`);
}

// ---- tasks ----

export type NewCompanyTask = {
  title: string;
  description?: string | undefined;
  status?: (typeof TASK_STATUSES)[number] | undefined;
  assignedAgentId?: string | null | undefined;
};

async function checkAgentOfCompany(
  db: CommonQueryMethods,
  tenantId: string,
  companyId: string,
  agentId: string | null | undefined,
) {
  if (agentId === undefined || agentId === null) return;
  if (!(await findCompanyAgent(db, tenantId, companyId, agentId)))
    throw new UnknownCompanyAgentError('No such agent in this company.');
}

/** Null when the company is not the tenant's; UnknownCompanyAgentError for a foreign assignee. */
export async function createCompanyTask(
  db: CommonQueryMethods,
  tenantId: string,
  companyId: string,
  input: NewCompanyTask,
): Promise<CompanyTaskRow | null> {
  if (!isUuid(companyId)) return null;
  await checkAgentOfCompany(db, tenantId, companyId, input.assignedAgentId);
  return db.maybeOne(sql.type(CompanyTaskRow)`
    insert into company_tasks (tenant_id, company_id, title, description, status, assigned_agent_id)
    select tenant_id, id, ${input.title}, ${input.description ?? ''}, ${input.status ?? 'open'}, ${input.assignedAgentId ?? null}
    from companies where id = ${companyId} and tenant_id = ${tenantId}
    returning ${TASK_COLUMNS}`);
}

export async function listCompanyTasks(
  db: CommonQueryMethods,
  tenantId: string,
  companyId: string,
  limit: number,
  cursor?: string,
) {
  return keysetPage(db, CompanyTaskRow, {
    table: 'company_tasks',
    columns: TASK_COLUMNS,
    where: sql.fragment`tenant_id = ${tenantId} and company_id = ${companyId}`,
    limit,
    cursor,
  });
}

export async function findCompanyTask(
  db: CommonQueryMethods,
  tenantId: string,
  companyId: string,
  taskId: string,
): Promise<CompanyTaskRow | null> {
  if (!isUuid(companyId) || !isUuid(taskId)) return null;
  return db.maybeOne(sql.type(CompanyTaskRow)`
    select ${TASK_COLUMNS} from company_tasks where id = ${taskId} and company_id = ${companyId} and tenant_id = ${tenantId}`);
}

export async function updateCompanyTask(
  db: CommonQueryMethods,
  tenantId: string,
  companyId: string,
  taskId: string,
  patch: Partial<NewCompanyTask>,
): Promise<CompanyTaskRow | null> {
  if (!isUuid(companyId) || !isUuid(taskId)) return null;
  await checkAgentOfCompany(db, tenantId, companyId, patch.assignedAgentId);
  const { assignedAgentId, ...rest } = patch;
  return db.maybeOne(sql.type(CompanyTaskRow)`
    update company_tasks set ${setClause({ ...rest, ...(assignedAgentId === undefined ? {} : { assigned_agent_id: assignedAgentId }) })}
    where id = ${taskId} and company_id = ${companyId} and tenant_id = ${tenantId}
    returning ${TASK_COLUMNS}`);
}
