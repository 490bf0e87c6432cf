// Company work for people (extension of the spec's platform API): companies,
// their configured agents and tasks, and starting a run of a task by an agent
// (202: the run executes as a job; follow it at GET /api/jobs/:jobId).
// Admins write, Viewers read; everything acts in the x-tenant-id tenant.
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import {
  createCompany,
  createCompanyAgent,
  createCompanyTask,
  deleteCompany,
  findCompany,
  listCompanies,
  listCompanyAgents,
  listCompanyTasks,
  UnknownCompanyAgentError,
  updateCompany,
  updateCompanyAgent,
  updateCompanyTask,
} from '../../../core/companies/companies.ts';
import { RunRefusedError, startCompanyRun } from '../../../core/companies/runs.ts';
import { findJobInTenant } from '../../../core/jobs/read.ts';
import { toJobStatus } from '../../../core/jobs/schema.ts';
import { InvalidCursorError } from '../../../core/paging.ts';
import { PlatformError, PlatformHttpError } from '../../errors.ts';
import { TenantHeaders } from '../../plugins/tenant.ts';
import {
  AgentBody,
  AgentPatch,
  Company,
  CompanyAgent,
  CompanyAgentPage,
  CompanyBody,
  CompanyPage,
  CompanyPatch,
  CompanyTask,
  CompanyTaskPage,
  PageQuery,
  RunAccepted,
  TaskBody,
  TaskPatch,
  toAgent,
  toCompany,
  toRun,
  toTask,
} from './schemas.ts';

const notFound = (what: string) => new PlatformHttpError(404, 'not_found', `No such ${what}.`);
const CompanyParams = z.object({ companyId: z.uuid() });

/** Turns the core's refusals into platform errors. */
async function mapped<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (error instanceof InvalidCursorError)
      throw new PlatformHttpError(
        400,
        'invalid_request',
        'Invalid request: query.cursor: not a cursor from this list.',
      );
    if (error instanceof UnknownCompanyAgentError)
      throw new PlatformHttpError(
        400,
        'invalid_request',
        'Invalid request: body.assignedAgentId: no such agent in this company.',
      );
    if (error instanceof RunRefusedError) {
      if (error.reason === 'task_not_found') throw notFound('task');
      if (error.reason === 'agent_not_found')
        throw new PlatformHttpError(
          400,
          'invalid_request',
          'Invalid request: body.agentId: no such agent in this company.',
        );
      throw new PlatformHttpError(409, error.reason, error.message);
    }
    throw error;
  }
}

const companyRoutes: FastifyPluginAsyncZod = async (app) => {
  const security = [{ PlatformJWT: [] }];
  const tags = ['companies'];
  const viewer = { onRequest: app.requireUser, preValidation: app.requireTenant('viewer') };
  const admin = { onRequest: app.requireUser, preValidation: app.requireTenant('admin') };
  const member = { onRequest: app.requireUser, preValidation: app.requireTenant('member') };
  const errors = { 400: PlatformError, 401: PlatformError, 403: PlatformError, 404: PlatformError };
  const doc = (operationId: string, summary: string, description: string) => ({
    operationId,
    tags,
    summary,
    description,
    security,
    headers: TenantHeaders,
  });
  // Company-scoped routes answer 404 for a company that is not the tenant's.
  const company = async (tenantId: string, companyId: string) =>
    (await findCompany(app.db, tenantId, companyId)) ?? Promise.reject(notFound('company'));

  app.post(
    '/api/companies',
    {
      ...admin,
      schema: {
        ...doc('createCompany', 'Create a company', 'Tenant Admin. A company groups agents, tasks and runs.'),
        body: CompanyBody,
        response: { 201: Company, ...errors },
      },
    },
    async (request, reply) =>
      reply
        .code(201)
        .send(toCompany(await createCompany(app.db, request.tenant!.id, request.user!.userId, request.body))),
  );

  app.get(
    '/api/companies',
    {
      ...viewer,
      schema: {
        ...doc(
          'listCompanies',
          'Companies of the tenant, newest first',
          'Keyset pages: pass nextCursor as cursor; rows added while paging never repeat or shift what was seen.',
        ),
        querystring: PageQuery,
        response: { 200: CompanyPage, ...errors },
      },
    },
    async (request) =>
      mapped(async () => {
        const page = await listCompanies(app.db, request.tenant!.id, request.query.limit, request.query.cursor);
        return { items: page.items.map(toCompany), nextCursor: page.nextCursor };
      }),
  );

  app.get(
    '/api/companies/:companyId',
    {
      ...viewer,
      schema: {
        ...doc('getCompany', 'One company', "Another tenant's company is a plain 404."),
        params: CompanyParams,
        response: { 200: Company, ...errors },
      },
    },
    async (request) => toCompany(await company(request.tenant!.id, request.params.companyId)),
  );

  app.patch(
    '/api/companies/:companyId',
    {
      ...admin,
      schema: {
        ...doc('updateCompany', 'Rename or describe a company', 'Tenant Admin. Only the fields sent change.'),
        params: CompanyParams,
        body: CompanyPatch,
        response: { 200: Company, ...errors },
      },
    },
    async (request) =>
      toCompany(
        (await updateCompany(app.db, request.tenant!.id, request.params.companyId, request.body)) ??
          (await Promise.reject(notFound('company'))),
      ),
  );

  app.delete(
    '/api/companies/:companyId',
    {
      ...admin,
      schema: {
        ...doc(
          'deleteCompany',
          'Delete a company',
          'Tenant Admin. Deletes its agents, tasks and runs; the jobs of past runs remain readable.',
        ),
        params: CompanyParams,
        response: { 204: z.null().describe('Deleted'), ...errors },
      },
    },
    async (request, reply) => {
      if (!(await deleteCompany(app.db, request.tenant!.id, request.params.companyId))) throw notFound('company');
      return reply.code(204).send(null);
    },
  );

  app.post(
    '/api/companies/:companyId/agents',
    {
      ...admin,
      schema: {
        ...doc(
          'createCompanyAgent',
          'Configure an agent of the company',
          'Tenant Admin. The model defaults to builtin/offline; the role is part of every prompt the agent gets. Takes an agent slot: 402 agent_addon_required when all are in use.',
        ),
        params: CompanyParams,
        body: AgentBody,
        response: { 201: CompanyAgent, 402: PlatformError, ...errors },
      },
    },
    async (request, reply) => {
      const agent = await createCompanyAgent(app.db, request.tenant!.id, request.params.companyId, request.body);
      if (!agent) throw notFound('company');
      return reply.code(201).send(toAgent(agent));
    },
  );

  app.get(
    '/api/companies/:companyId/agents',
    {
      ...viewer,
      schema: {
        ...doc('listCompanyAgents', 'Agents of the company, newest first', 'Keyset pages, like GET /api/companies.'),
        params: CompanyParams,
        querystring: PageQuery,
        response: { 200: CompanyAgentPage, ...errors },
      },
    },
    async (request) =>
      mapped(async () => {
        await company(request.tenant!.id, request.params.companyId);
        const page = await listCompanyAgents(
          app.db,
          request.tenant!.id,
          request.params.companyId,
          request.query.limit,
          request.query.cursor,
        );
        return { items: page.items.map(toAgent), nextCursor: page.nextCursor };
      }),
  );

  app.patch(
    '/api/companies/:companyId/agents/:agentId',
    {
      ...admin,
      schema: {
        ...doc(
          'updateCompanyAgent',
          'Change an agent of the company',
          'Tenant Admin. A paused agent cannot start runs.',
        ),
        params: CompanyParams.extend({ agentId: z.uuid() }),
        body: AgentPatch,
        response: { 200: CompanyAgent, ...errors },
      },
    },
    async (request) => {
      const agent = await updateCompanyAgent(
        app.db,
        request.tenant!.id,
        request.params.companyId,
        request.params.agentId,
        request.body,
      );
      if (!agent) throw notFound('agent');
      return toAgent(agent);
    },
  );

  app.post(
    '/api/companies/:companyId/tasks',
    {
      ...member,
      schema: {
        ...doc(
          'createCompanyTask',
          'Create a task of the company',
          'Tenant Member or Admin. assignedAgentId, when given, must be an agent of this company.',
        ),
        params: CompanyParams,
        body: TaskBody,
        response: { 201: CompanyTask, ...errors },
      },
    },
    async (request, reply) =>
      mapped(async () => {
        const task = await createCompanyTask(app.db, request.tenant!.id, request.params.companyId, request.body);
        if (!task) throw notFound('company');
        return reply.code(201).send(toTask(task));
      }),
  );

  app.get(
    '/api/companies/:companyId/tasks',
    {
      ...viewer,
      schema: {
        ...doc('listCompanyTasks', 'Tasks of the company, newest first', 'Keyset pages, like GET /api/companies.'),
        params: CompanyParams,
        querystring: PageQuery,
        response: { 200: CompanyTaskPage, ...errors },
      },
    },
    async (request) =>
      mapped(async () => {
        await company(request.tenant!.id, request.params.companyId);
        const page = await listCompanyTasks(
          app.db,
          request.tenant!.id,
          request.params.companyId,
          request.query.limit,
          request.query.cursor,
        );
        return { items: page.items.map(toTask), nextCursor: page.nextCursor };
      }),
  );

  app.patch(
    '/api/companies/:companyId/tasks/:taskId',
    {
      ...member,
      schema: {
        ...doc(
          'updateCompanyTask',
          'Change a task of the company',
          'Tenant Member or Admin. Status open, in_progress, done or cancelled; assignedAgentId null unassigns.',
        ),
        params: CompanyParams.extend({ taskId: z.uuid() }),
        body: TaskPatch,
        response: { 200: CompanyTask, ...errors },
      },
    },
    async (request) =>
      mapped(async () => {
        const task = await updateCompanyTask(
          app.db,
          request.tenant!.id,
          request.params.companyId,
          request.params.taskId,
          request.body,
        );
        if (!task) throw notFound('task');
        return toTask(task);
      }),
  );

  app.post(
    '/api/companies/:companyId/tasks/:taskId/runs',
    {
      ...member,
      schema: {
        ...doc(
          'startCompanyRun',
          "Run a task by one of the company's agents",
          "Tenant Member or Admin. Answers 202 at once with the run and its job; the agent's model works on a worker. Follow the job at GET /api/jobs/:jobId (or /api/ws); the run's status mirrors it and its output is set once it succeeds. 409 when the agent is paused or the task is done or cancelled; 429 QUEUE_LIMIT_REACHED when the account has as many unfinished jobs as its plan allows.",
        ),
        params: CompanyParams.extend({ taskId: z.uuid() }),
        body: z.object({ agentId: z.uuid().describe('An active agent of this company') }),
        response: { 202: RunAccepted, ...errors, 409: PlatformError, 429: PlatformError },
      },
    },
    async (request, reply) =>
      mapped(async () => {
        const tenantId = request.tenant!.id;
        const { run, job } = await startCompanyRun(app.db, {
          tenantId,
          companyId: request.params.companyId,
          taskId: request.params.taskId,
          agentId: request.body.agentId,
        });
        // Read after commit: a fast worker may already have moved it on.
        const row = await findJobInTenant(app.db, job.id, tenantId);
        if (!row) throw new Error('the job of a run just started is missing');
        return reply
          .code(202)
          .header('location', `/api/jobs/${job.id}`)
          .send({ run: toRun(run), job: toJobStatus(row) });
      }),
  );
};

export default companyRoutes;
