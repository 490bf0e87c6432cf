// Agent API company reads (read-only projections): companies, their agents,
// tasks and runs. Checked in the spec's order (rule 1): token and scope
// (agent-auth), claimed account (403 claim_required), plan with company work
// (402 plan_required), then input (400) and the company itself (404, which
// is also what another tenant's ids get). Lists are keyset pages.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import {
  findCompany,
  findCompanyTask,
  listCompanies,
  listCompanyAgents,
  listCompanyTasks,
} from '../../../core/companies/companies.ts';
import { findCompanyRun, listCompanyRuns } from '../../../core/companies/runs.ts';
import { InvalidCursorError } from '../../../core/paging.ts';
import { planOf } from '../../../core/plans.ts';
import { AgentApiError, AgentHttpError, SharedRateLimitError } from '../../errors.ts';
import { callerOf, defineOperation, registerHttpOperation, type Caller } from './operation.ts';
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
const errors = {
  400: AgentApiError,
  401: AgentApiError,
  402: AgentApiError,
  403: AgentApiError,
  404: AgentApiError,
  429: SharedRateLimitError,
  503: AgentApiError,
};

const notFound = (what: string) =>
  new AgentHttpError(
    404,
    'not_found',
    `No ${what} with this reference is visible to you; re-read the list instead of guessing identifiers.`,
    'reread_list',
  );
const badRequest = (message: string) => new AgentHttpError(400, 'invalid_request', message, 'fix_request');

/** Claimed account, then a plan with company work (rule 1). */
function requireCompanyWork({ agent, context }: Caller) {
  if (agent.claimState !== 'claimed') {
    throw new AgentHttpError(
      403,
      'claim_required',
      'Company reads need a claimed account; claim it through the identity provider, then get a new token.',
      'claim_account',
    );
  }
  if (!planOf(context.plan).companyWork) {
    throw new AgentHttpError(
      402,
      'plan_required',
      `The ${context.plan} plan does not include company work; the account owner can change the plan.`,
      'change_plan',
    );
  }
}

/** The cursor is ours or the request is malformed. */
async function paged<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (error instanceof InvalidCursorError)
      throw badRequest('Invalid request: query.cursor: not a cursor from this list; start again without one.');
    throw error;
  }
}

const tenantOf = (caller: Caller) => caller.context.tenant_id;
const company = async (app: FastifyInstance, caller: Caller, ref: string) =>
  (await findCompany(app.db, tenantOf(caller), ref)) ?? Promise.reject(notFound('company'));
const CompanyParams = z.object({ companyRef: CompanyRef });
const read = { method: 'GET', scope: SCOPE, role: 'viewer', errors, guard: requireCompanyWork } as const;

export const companyOperations = [
  defineOperation({
    ...read,
    operationId: 'listAgentCompanies',
    path: '/api/agent/v1/companies',
    summary: 'Companies of the workspace',
    description: 'Newest first; `cursor` continues with `next_cursor` of the previous page.',
    query: AgentPageQuery,
    response: AgentCompanyListResponse,
    mcp: { title: 'List companies', readOnly: true },
    run: (app, caller, { query }) =>
      paged(async () => {
        const page = await listCompanies(app.db, tenantOf(caller), query.limit ?? DEFAULT_LIMIT, query.cursor);
        return { items: page.items, next_cursor: page.nextCursor };
      }),
  }),
  defineOperation({
    ...read,
    operationId: 'getAgentCompany',
    path: '/api/agent/v1/companies/:companyRef',
    summary: 'One company',
    params: CompanyParams,
    response: AgentCompanyResponse,
    mcp: { title: 'Get a company', readOnly: true },
    run: (app, caller, { params }) => company(app, caller, params.companyRef),
  }),
  defineOperation({
    ...read,
    operationId: 'listAgentCompanyAgents',
    path: '/api/agent/v1/companies/:companyRef/agents',
    summary: 'Agents configured for a company',
    params: CompanyParams,
    query: AgentPageQuery,
    response: AgentCompanyAgentListResponse,
    mcp: { title: "List a company's agents", readOnly: true },
    run: (app, caller, { params, query }) =>
      paged(async () => {
        const c = await company(app, caller, params.companyRef);
        const page = await listCompanyAgents(
          app.db,
          tenantOf(caller),
          c.id,
          query.limit ?? DEFAULT_LIMIT,
          query.cursor,
        );
        return { items: page.items, next_cursor: page.nextCursor };
      }),
  }),
  defineOperation({
    ...read,
    operationId: 'listAgentCompanyTasks',
    path: '/api/agent/v1/companies/:companyRef/tasks',
    summary: 'Tasks of a company',
    params: CompanyParams,
    query: AgentPageQuery,
    response: AgentCompanyTaskListResponse,
    mcp: { title: "List a company's tasks", readOnly: true },
    run: (app, caller, { params, query }) =>
      paged(async () => {
        const c = await company(app, caller, params.companyRef);
        const page = await listCompanyTasks(app.db, tenantOf(caller), c.id, query.limit ?? DEFAULT_LIMIT, query.cursor);
        return { items: page.items, next_cursor: page.nextCursor };
      }),
  }),
  defineOperation({
    ...read,
    operationId: 'getAgentCompanyTask',
    path: '/api/agent/v1/companies/:companyRef/tasks/:taskRef',
    summary: 'One task of a company',
    params: z.object({ companyRef: CompanyRef, taskRef: TaskRef }),
    response: AgentCompanyTaskResponse,
    mcp: { title: 'Get a task', readOnly: true },
    run: async (app, caller, { params }) => {
      const c = await company(app, caller, params.companyRef);
      return (
        (await findCompanyTask(app.db, tenantOf(caller), c.id, params.taskRef)) ?? Promise.reject(notFound('task'))
      );
    },
  }),
  defineOperation({
    ...read,
    operationId: 'listAgentCompanyRuns',
    path: '/api/agent/v1/companies/:companyRef/runs',
    summary: 'Runs of a company',
    description: '`taskId` keeps the runs of one task.',
    params: CompanyParams,
    query: AgentRunPageQuery,
    response: AgentCompanyRunListResponse,
    mcp: { title: "List a company's runs", readOnly: true },
    run: (app, caller, { params, query }) =>
      paged(async () => {
        const c = await company(app, caller, params.companyRef);
        const { limit, cursor, taskId } = query;
        const page = await listCompanyRuns(app.db, tenantOf(caller), c.id, {
          limit: limit ?? DEFAULT_LIMIT,
          cursor,
          taskId,
        });
        return { items: page.items, next_cursor: page.nextCursor };
      }),
  }),
  defineOperation({
    ...read,
    operationId: 'getAgentCompanyRun',
    path: '/api/agent/v1/companies/:companyRef/runs/:runRef',
    summary: 'One run of a company',
    description: "Its status mirrors the run's job; output is set once it succeeded.",
    params: z.object({ companyRef: CompanyRef, runRef: RunRef }),
    response: AgentCompanyRunResponse,
    mcp: { title: 'Get a run', readOnly: true },
    run: async (app, caller, { params }) => {
      const c = await company(app, caller, params.companyRef);
      return (await findCompanyRun(app.db, tenantOf(caller), c.id, params.runRef)) ?? Promise.reject(notFound('run'));
    },
  }),
];

const agentCompanyRoutes: FastifyPluginAsyncZod = async (app) => {
  for (const op of companyOperations) registerHttpOperation(app, op);

  // The router gives up on a path segment longer than its maxParamLength
  // before any schema sees it; this catch-all answers those with the 400 the
  // spec asks for (and anything else under /companies/ with a 404).
  const onRequest = [app.requireAgent(SCOPE), async (request: FastifyRequest) => requireCompanyWork(callerOf(request))];
  app.get('/api/agent/v1/companies/*', { onRequest, schema: { hide: true } }, async (request) => {
    const [companyRef = '', kind, ref, ...rest] = ((request.params as Record<string, string>)['*'] ?? '').split('/');
    if (companyRef.length > REF_BOUNDS.company)
      throw badRequest(`Invalid request: path.companyRef: at most ${REF_BOUNDS.company} characters.`);
    if ((kind === 'tasks' || kind === 'runs') && ref !== undefined && ref.length > REF_BOUNDS[kind]) {
      throw badRequest(
        `Invalid request: path.${kind === 'tasks' ? 'taskRef' : 'runRef'}: at most ${REF_BOUNDS[kind]} characters.`,
      );
    }
    throw notFound(rest.length === 0 && kind ? kind : 'resource');
  });
};

export default agentCompanyRoutes;
