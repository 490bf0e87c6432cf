// Agent API shapes of the read-only company projections, registered under
// the spec's schema names. Fields are snake_case like the rest of /api/agent/v1.
import { z } from 'zod';
import { TASK_STATUSES } from '../../../core/companies/companies.ts';
import { JOB_STATUSES } from '../../../core/jobs/schema.ts';

// Bounds of the spec's reference identifiers and paging parameters.
export const CompanyRef = z.string().min(1).max(256).describe('companyRef: the company id from the company list');
export const TaskRef = z.string().min(1).max(2048).describe('taskRef: the task id from the task list');
export const RunRef = z.string().min(1).max(256).describe('runRef: the run id from the run list');
export const REF_BOUNDS = { company: 256, tasks: 2048, runs: 256 } as const;

export const AgentPageQuery = z.object({
  limit: z.coerce.number().int().min(1).max(100).optional().describe('Page size, 1-100 (50 when absent)'),
  cursor: z.string().min(1).max(1000).optional().describe('Opaque: next_cursor of the previous page'),
});
export const AgentRunPageQuery = AgentPageQuery.extend({
  taskId: z.string().min(1).max(256).optional().describe('Only runs of this task'),
});

const Company = z.object({
  id: z.uuid(),
  name: z.string(),
  description: z.string(),
  created_at: z.iso.datetime(),
  updated_at: z.iso.datetime(),
});
const CompanyAgent = z.object({
  id: z.uuid(),
  company_id: z.uuid(),
  name: z.string(),
  role: z.string(),
  model: z.string(),
  status: z.enum(['active', 'paused']),
  created_at: z.iso.datetime(),
  updated_at: z.iso.datetime(),
});
const CompanyTask = z.object({
  id: z.uuid(),
  company_id: z.uuid(),
  title: z.string(),
  description: z.string(),
  status: z.enum(TASK_STATUSES),
  assigned_agent_id: z.uuid().nullable(),
  created_at: z.iso.datetime(),
  updated_at: z.iso.datetime(),
});
const CompanyRun = z.object({
  id: z.uuid(),
  company_id: z.uuid(),
  task_id: z.uuid(),
  agent_id: z.uuid().nullable(),
  job_id: z.uuid().nullable(),
  status: z.enum(JOB_STATUSES),
  model: z.string().nullable(),
  output: z.string().nullable(),
  created_at: z.iso.datetime(),
  finished_at: z.iso.datetime().nullable(),
});

const list = <T extends z.ZodType>(item: T, id: string) =>
  z
    .object({
      items: z.array(item),
      next_cursor: z.string().nullable().describe('Pass as cursor for the next page; null on the last'),
    })
    .meta({ id });

export const AgentCompanyResponse = Company.meta({ id: 'AgentCompanyResponse' });
export const AgentCompanyListResponse = list(Company, 'AgentCompanyListResponse');
export const AgentCompanyAgentListResponse = list(CompanyAgent, 'AgentCompanyAgentListResponse');
export const AgentCompanyTaskResponse = CompanyTask.meta({ id: 'AgentCompanyTaskResponse' });
export const AgentCompanyTaskListResponse = list(CompanyTask, 'AgentCompanyTaskListResponse');
export const AgentCompanyRunResponse = CompanyRun.meta({ id: 'AgentCompanyRunResponse' });
export const AgentCompanyRunListResponse = list(CompanyRun, 'AgentCompanyRunListResponse');
