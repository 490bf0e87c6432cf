// Platform shapes of the company area (camelCase, like the rest of /api).
import { z } from 'zod';
import type { CompanyAgentRow, CompanyRow, CompanyTaskRow } from '../../../core/companies/companies.ts';
import type { CompanyRunRow } from '../../../core/companies/runs.ts';
import { TASK_STATUSES } from '../../../core/companies/companies.ts';
import { JOB_STATUSES, JobStatus } from '../../../core/jobs/schema.ts';
import { nameSchema } from '../../../core/names.ts';
import { parseModel } from '../../../core/providers/registry.ts';

export const Company = z
  .object({
    id: z.uuid(),
    name: z.string(),
    description: z.string(),
    createdAt: z.iso.datetime(),
    updatedAt: z.iso.datetime(),
  })
  .meta({ id: 'Company' });
export const CompanyAgent = z
  .object({
    id: z.uuid(),
    companyId: z.uuid(),
    name: z.string(),
    role: z.string().describe('What the agent does in the company; part of every prompt it gets'),
    model: z.string().describe('provider/model the agent runs on'),
    status: z.enum(['active', 'paused']),
    createdAt: z.iso.datetime(),
    updatedAt: z.iso.datetime(),
  })
  .meta({ id: 'CompanyAgent' });
export const CompanyTask = z
  .object({
    id: z.uuid(),
    companyId: z.uuid(),
    title: z.string(),
    description: z.string(),
    status: z.enum(TASK_STATUSES),
    assignedAgentId: z.uuid().nullable(),
    createdAt: z.iso.datetime(),
    updatedAt: z.iso.datetime(),
  })
  .meta({ id: 'CompanyTask' });
export const CompanyRun = z
  .object({
    id: z.uuid(),
    companyId: z.uuid(),
    taskId: z.uuid(),
    agentId: z.uuid().nullable(),
    jobId: z.uuid().nullable().describe('Follow it at GET /api/jobs/:jobId or over /api/ws'),
    status: z.enum(JOB_STATUSES).describe("Mirrors the job's status"),
    model: z.string().nullable(),
    output: z.string().nullable().describe('What the agent answered, once the run succeeded'),
    createdAt: z.iso.datetime(),
    finishedAt: z.iso.datetime().nullable(),
  })
  .meta({ id: 'CompanyRun' });

export const RunAccepted = z.object({ run: CompanyRun, job: JobStatus }).meta({ id: 'CompanyRunAccepted' });

const page = <T extends z.ZodType>(item: T, id: string) =>
  z.object({ items: z.array(item), nextCursor: z.string().nullable() }).meta({ id });
export const CompanyPage = page(Company, 'CompanyPage');
export const CompanyAgentPage = page(CompanyAgent, 'CompanyAgentPage');
export const CompanyTaskPage = page(CompanyTask, 'CompanyTaskPage');

export const PageQuery = z.object({
  limit: z.coerce.number().int().min(1).max(100).default(50).describe('Page size, 1-100'),
  cursor: z.string().min(1).max(500).optional().describe('Opaque cursor from the previous page'),
});

const Name = nameSchema();
const Model = z
  .string()
  .max(200)
  .refine((m) => parseModel(m) !== null, 'a known provider/model, e.g. builtin/offline');

export const CompanyBody = z.object({ name: Name, description: z.string().max(10_000).optional() });
export const CompanyPatch = CompanyBody.partial();
export const AgentBody = z.object({
  name: Name,
  role: z.string().max(10_000).optional(),
  model: Model.optional(),
  status: z.enum(['active', 'paused']).optional(),
});
export const AgentPatch = AgentBody.partial();
export const TaskBody = z.object({
  title: z.string().trim().min(1).max(500),
  description: z.string().max(20_000).optional(),
  status: z.enum(TASK_STATUSES).optional(),
  assignedAgentId: z.uuid().nullable().optional(),
});
export const TaskPatch = TaskBody.partial();

export const toCompany = (c: CompanyRow) => ({
  id: c.id,
  name: c.name,
  description: c.description,
  createdAt: c.created_at,
  updatedAt: c.updated_at,
});
export const toAgent = (a: CompanyAgentRow) => ({
  id: a.id,
  companyId: a.company_id,
  name: a.name,
  role: a.role,
  model: a.model,
  status: a.status,
  createdAt: a.created_at,
  updatedAt: a.updated_at,
});
export const toTask = (t: CompanyTaskRow) => ({
  id: t.id,
  companyId: t.company_id,
  title: t.title,
  description: t.description,
  status: t.status,
  assignedAgentId: t.assigned_agent_id,
  createdAt: t.created_at,
  updatedAt: t.updated_at,
});
export const toRun = (r: CompanyRunRow) => ({
  id: r.id,
  companyId: r.company_id,
  taskId: r.task_id,
  agentId: r.agent_id,
  jobId: r.job_id,
  status: r.status,
  model: r.model,
  output: r.output,
  createdAt: r.created_at,
  finishedAt: r.finished_at,
});
