// A company's tasks: create, list and change them (Members and Admins write).
import { z } from 'zod';
import { createCompanyTask, listCompanyTasks, updateCompanyTask } from '../../../core/companies/companies.ts';
import { type CompanyApp, CompanyParams, type CompanyRouteContext, mapped, notFound } from './context.ts';
import { CompanyTask, CompanyTaskPage, PageQuery, TaskBody, TaskPatch, toTask } from './schemas.ts';

export function registerCompanyTaskRoutes(
  app: CompanyApp,
  { viewer, member, errors, doc, company }: CompanyRouteContext,
): void {
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
}
