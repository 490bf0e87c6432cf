// Agent API company reads (read-only projections): companies, their agents,
// tasks and runs. Checked in the spec's order (rule 1): token and scope
// (agent-auth), claimed account (403 claim_required), plan with company work
// (402 plan_required), then input (400) and the company itself (404, which
// is also what another tenant's ids get). Lists are keyset pages.
import type { FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { findCompany, findCompanyTask, listCompanies, listCompanyAgents, listCompanyTasks } from '../../../core/companies/companies.ts';
import { findCompanyRun, listCompanyRuns } from '../../../core/companies/runs.ts';
import { InvalidCursorError } from '../../../core/paging.ts';
import { planOf } from '../../../core/plans.ts';
import { AgentApiError, AgentHttpError, SharedRateLimitError } from '../../errors.ts';
import {
  AgentCompanyAgentListResponse,
  AgentCompanyListResponse,
  AgentCompanyResponse,
  AgentCompanyRunListResponse,
  AgentCompanyRunResponse,
  AgentCompanyTaskListResponse,
  AgentCompanyTaskResponse,
  AgentPageQuery,
  AgentRunPageQuery,
  CompanyRef,
  REF_BOUNDS,
  RunRef,
  TaskRef,
} from './company-schemas.ts';

const SCOPE = 'svc:companies:read';
const DEFAULT_LIMIT = 50;
const errors = { 400: AgentApiError, 401: AgentApiError, 402: AgentApiError, 403: AgentApiError, 404: AgentApiError, 429: SharedRateLimitError, 503: AgentApiError };

const notFound = (what: string) =>
  new AgentHttpError(404, 'not_found', `No ${what} with this reference is visible to you; re-read the list instead of guessing identifiers.`, 'reread_list');
const badRequest = (message: string) => new AgentHttpError(400, 'invalid_request', message, 'fix_request');

/** Claimed account, then a plan with company work (rule 1). */
async function requireCompanyWork(request: FastifyRequest) {
  const agent = request.agent;
  const ctx = request.agentContext;
  if (!agent || !ctx) throw new AgentHttpError(401, 'invalid_credential', 'Authenticate first.', 'reauthenticate');
  if (agent.claimState !== 'claimed') {
    throw new AgentHttpError(403, 'claim_required', 'Company reads need a claimed account; claim it through the identity provider, then get a new token.', 'claim_account');
  }
  if (!planOf(ctx.plan).companyWork) {
    throw new AgentHttpError(402, 'plan_required', `The ${ctx.plan} plan does not include company work; the account owner can change the plan.`, 'change_plan');
  }
}

/** The cursor is ours or the request is malformed. */
async function paged<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (error instanceof InvalidCursorError) throw badRequest('Invalid request: query.cursor: not a cursor from this list; start again without one.');
    throw error;
  }
}

const agentCompanyRoutes: FastifyPluginAsyncZod = async (app) => {
  const onRequest = [app.requireAgent(SCOPE), requireCompanyWork];
  const base = { tags: ['agent'], security: [{ AgentBearer: [SCOPE] }] };
  const tenantOf = (request: FastifyRequest) => request.agentContext!.tenant_id;
  const company = async (request: FastifyRequest, ref: string) => (await findCompany(app.db, tenantOf(request), ref)) ?? Promise.reject(notFound('company'));

  app.get('/api/agent/v1/companies', {
    onRequest,
    schema: { ...base, operationId: 'listAgentCompanies', summary: 'Companies of the workspace', description: 'Newest first; `cursor` continues with `next_cursor` of the previous page.', querystring: AgentPageQuery, response: { 200: AgentCompanyListResponse, ...errors } },
  }, async (request) => paged(async () => {
    const page = await listCompanies(app.db, tenantOf(request), request.query.limit ?? DEFAULT_LIMIT, request.query.cursor);
    return { items: page.items, next_cursor: page.nextCursor };
  }));

  app.get('/api/agent/v1/companies/:companyRef', {
    onRequest,
    schema: { ...base, operationId: 'getAgentCompany', summary: 'One company', params: z.object({ companyRef: CompanyRef }), response: { 200: AgentCompanyResponse, ...errors } },
  }, async (request) => company(request, request.params.companyRef));

  app.get('/api/agent/v1/companies/:companyRef/agents', {
    onRequest,
    schema: { ...base, operationId: 'listAgentCompanyAgents', summary: 'Agents configured for a company', params: z.object({ companyRef: CompanyRef }), querystring: AgentPageQuery, response: { 200: AgentCompanyAgentListResponse, ...errors } },
  }, async (request) => paged(async () => {
    const c = await company(request, request.params.companyRef);
    const page = await listCompanyAgents(app.db, tenantOf(request), c.id, request.query.limit ?? DEFAULT_LIMIT, request.query.cursor);
    return { items: page.items, next_cursor: page.nextCursor };
  }));

  app.get('/api/agent/v1/companies/:companyRef/tasks', {
    onRequest,
    schema: { ...base, operationId: 'listAgentCompanyTasks', summary: 'Tasks of a company', params: z.object({ companyRef: CompanyRef }), querystring: AgentPageQuery, response: { 200: AgentCompanyTaskListResponse, ...errors } },
  }, async (request) => paged(async () => {
    const c = await company(request, request.params.companyRef);
    const page = await listCompanyTasks(app.db, tenantOf(request), c.id, request.query.limit ?? DEFAULT_LIMIT, request.query.cursor);
    return { items: page.items, next_cursor: page.nextCursor };
  }));

  app.get('/api/agent/v1/companies/:companyRef/tasks/:taskRef', {
    onRequest,
    schema: { ...base, operationId: 'getAgentCompanyTask', summary: 'One task of a company', params: z.object({ companyRef: CompanyRef, taskRef: TaskRef }), response: { 200: AgentCompanyTaskResponse, ...errors } },
  }, async (request) => {
    const c = await company(request, request.params.companyRef);
    return (await findCompanyTask(app.db, tenantOf(request), c.id, request.params.taskRef)) ?? Promise.reject(notFound('task'));
  });

  app.get('/api/agent/v1/companies/:companyRef/runs', {
    onRequest,
    schema: { ...base, operationId: 'listAgentCompanyRuns', summary: 'Runs of a company', description: '`taskId` keeps the runs of one task.', params: z.object({ companyRef: CompanyRef }), querystring: AgentRunPageQuery, response: { 200: AgentCompanyRunListResponse, ...errors } },
  }, async (request) => paged(async () => {
    const c = await company(request, request.params.companyRef);
    const { limit, cursor, taskId } = request.query;
    const page = await listCompanyRuns(app.db, tenantOf(request), c.id, { limit: limit ?? DEFAULT_LIMIT, cursor, taskId });
    return { items: page.items, next_cursor: page.nextCursor };
  }));

  app.get('/api/agent/v1/companies/:companyRef/runs/:runRef', {
    onRequest,
    schema: { ...base, operationId: 'getAgentCompanyRun', summary: 'One run of a company', description: 'Its status mirrors the run\'s job; output is set once it succeeded.', params: z.object({ companyRef: CompanyRef, runRef: RunRef }), response: { 200: AgentCompanyRunResponse, ...errors } },
  }, async (request) => {
    const c = await company(request, request.params.companyRef);
    return (await findCompanyRun(app.db, tenantOf(request), c.id, request.params.runRef)) ?? Promise.reject(notFound('run'));
  });

  // The router gives up on a path segment longer than its maxParamLength
  // before any schema sees it; this catch-all answers those with the 400 the
  // spec asks for (and anything else under /companies/ with a 404).
  app.get('/api/agent/v1/companies/*', { onRequest, schema: { hide: true } }, async (request) => {
    const [companyRef = '', kind, ref, ...rest] = ((request.params as Record<string, string>)['*'] ?? '').split('/');
    if (companyRef.length > REF_BOUNDS.company) throw badRequest(`Invalid request: path.companyRef: at most ${REF_BOUNDS.company} characters.`);
    if ((kind === 'tasks' || kind === 'runs') && ref !== undefined && ref.length > REF_BOUNDS[kind]) {
      throw badRequest(`Invalid request: path.${kind === 'tasks' ? 'taskRef' : 'runRef'}: at most ${REF_BOUNDS[kind]} characters.`);
    }
    throw notFound(rest.length === 0 && kind ? kind : 'resource');
  });
};

export default agentCompanyRoutes;
