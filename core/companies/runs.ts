// Company runs: one task carried out by one company agent. Starting a run
// writes the run row and its 'company.run' job in one transaction, so a run
// without a job (or a job without its run) never exists. The run's status
// mirrors the job by trigger (sql/migrations/0008_company_work.sql).
import { timeOrderedId } from '../ids.ts';
import { z } from 'zod';
import { sql, type CommonQueryMethods, type DatabasePool } from '../db/pool.ts';
import { enqueueJob, type EnqueuedJob } from '../jobs/enqueue.ts';
import { JOB_STATUSES } from '../jobs/schema.ts';
import { decodeCursor } from '../paging.ts';
import { findCompanyAgent } from './companies.ts';
import { isUuid, keysetPage } from './paging.ts';

export const COMPANY_RUN_KIND = 'company.run';

export const CompanyRunRow = z.object({
  id: z.string(),
  company_id: z.string(),
  task_id: z.string(),
  agent_id: z.string().nullable(),
  job_id: z.string().nullable(),
  status: z.enum(JOB_STATUSES),
  model: z.string().nullable(),
  output: z.string().nullable(),
  created_at: z.string(),
  finished_at: z.string().nullable(),
});
export type CompanyRunRow = z.infer<typeof CompanyRunRow>;
const RUN_COLUMNS = sql.fragment`id, company_id, task_id, agent_id, job_id, status, model, output, created_at, finished_at`;

export class RunRefusedError extends Error {
  override name = 'RunRefusedError';
  constructor(
    readonly reason: 'task_not_found' | 'agent_not_found' | 'agent_paused' | 'task_closed',
    message: string,
  ) {
    super(message);
  }
}

/**
 * Starts a run of the task by the agent. Throws RunRefusedError when the task
 * or agent is not the company's, the agent is paused or the task is closed.
 */
export async function startCompanyRun(
  db: DatabasePool,
  input: { tenantId: string; companyId: string; taskId: string; agentId: string },
): Promise<{ run: CompanyRunRow; job: EnqueuedJob }> {
  const { tenantId, companyId, taskId, agentId } = input;
  return db.transaction(async (tx) => {
    // Lock the task so two starts and a PATCH to done cannot interleave.
    const task =
      isUuid(companyId) && isUuid(taskId)
        ? await tx.maybeOne(sql.type(z.object({ status: z.string() }))`
          select status from company_tasks where id = ${taskId} and company_id = ${companyId} and tenant_id = ${tenantId} for update`)
        : null;
    if (!task) throw new RunRefusedError('task_not_found', 'No such task in this company.');
    if (task.status === 'done' || task.status === 'cancelled')
      throw new RunRefusedError('task_closed', `The task is ${task.status}; reopen it to run it again.`);
    const agent = await findCompanyAgent(tx, tenantId, companyId, agentId);
    if (!agent) throw new RunRefusedError('agent_not_found', 'No such agent in this company.');
    if (agent.status !== 'active')
      throw new RunRefusedError('agent_paused', 'The agent is paused; resume it to start runs.');

    const jobId = timeOrderedId();
    const runId = timeOrderedId();
    // The job first: the run's job_id references it.
    const job = await enqueueJob(tx, {
      id: jobId,
      kind: COMPANY_RUN_KIND,
      tenantId,
      input: { runId },
      maxAttempts: 5,
      quota: true,
    });
    const run = await tx.one(sql.type(CompanyRunRow)`
      insert into company_runs (id, tenant_id, company_id, task_id, agent_id, job_id, model)
      values (${runId}, ${tenantId}, ${companyId}, ${taskId}, ${agentId}, ${jobId}, ${agent.model})
      returning ${RUN_COLUMNS}`);
    await tx.query(sql.unsafe`
      update company_tasks set status = 'in_progress', updated_at = now() where id = ${taskId} and status = 'open'`);
    return { run, job };
  });
}

export async function listCompanyRuns(
  db: CommonQueryMethods,
  tenantId: string,
  companyId: string,
  opts: { limit: number; cursor?: string | undefined; taskId?: string | undefined },
) {
  // A taskId that is no uuid matches nothing: an empty page, not an error.
  if (opts.taskId !== undefined && !isUuid(opts.taskId)) {
    if (opts.cursor !== undefined) decodeCursor(opts.cursor); // a bad cursor is still a 400
    return { items: [] as CompanyRunRow[], nextCursor: null };
  }
  const byTask = opts.taskId === undefined ? sql.fragment`` : sql.fragment`and task_id = ${opts.taskId}`;
  return keysetPage(db, CompanyRunRow, {
    table: 'company_runs',
    columns: RUN_COLUMNS,
    where: sql.fragment`tenant_id = ${tenantId} and company_id = ${companyId} ${byTask}`,
    limit: opts.limit,
    cursor: opts.cursor,
  });
}

export async function findCompanyRun(
  db: CommonQueryMethods,
  tenantId: string,
  companyId: string,
  runId: string,
): Promise<CompanyRunRow | null> {
  if (!isUuid(companyId) || !isUuid(runId)) return null;
  return db.maybeOne(sql.type(CompanyRunRow)`
    select ${RUN_COLUMNS} from company_runs where id = ${runId} and company_id = ${companyId} and tenant_id = ${tenantId}`);
}
