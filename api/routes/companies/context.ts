// What every company route shares: the role guards, the OpenAPI wording, the
// tenant's-company lookup and the mapping of the core's refusals to errors.
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { findCompany, UnknownCompanyAgentError } from '../../../core/companies/companies.ts';
import { RunRefusedError } from '../../../core/companies/runs.ts';
import { InvalidCursorError } from '../../../core/paging.ts';
import { PlatformError, PlatformHttpError } from '../../errors.ts';
import { TenantHeaders } from '../../plugins/tenant.ts';

/** The app as the company routes' plugin receives it (Zod type provider). */
export type CompanyApp = Parameters<FastifyPluginAsyncZod>[0];

export const notFound = (what: string) => new PlatformHttpError(404, 'not_found', `No such ${what}.`);
export const CompanyParams = z.object({ companyId: z.uuid() });

/** Turns the core's refusals into platform errors. */
export async function mapped<T>(work: () => Promise<T>): Promise<T> {
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

/** The guards, error responses, OpenAPI wording and company lookup of one plugin instance. */
export function companyRouteContext(app: CompanyApp) {
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
  return { viewer, admin, member, errors, doc, company };
}

export type CompanyRouteContext = ReturnType<typeof companyRouteContext>;
