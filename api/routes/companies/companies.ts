// The companies themselves: create, list, read, change and delete one.
import { z } from 'zod';
import { createCompany, deleteCompany, listCompanies, updateCompany } from '../../../core/companies/companies.ts';
import { type CompanyApp, CompanyParams, type CompanyRouteContext, mapped, notFound } from './context.ts';
import { Company, CompanyBody, CompanyPage, CompanyPatch, PageQuery, toCompany } from './schemas.ts';

export function registerCompanyRoutes(app: CompanyApp, context: CompanyRouteContext): void {
  registerCompanyCollectionRoutes(app, context);
  registerOneCompanyRoutes(app, context);
}

/** POST and GET /api/companies. */
function registerCompanyCollectionRoutes(app: CompanyApp, { viewer, admin, errors, doc }: CompanyRouteContext): void {
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
}

/** GET, PATCH and DELETE /api/companies/:companyId. */
function registerOneCompanyRoutes(app: CompanyApp, { viewer, admin, errors, doc, company }: CompanyRouteContext): void {
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
}
