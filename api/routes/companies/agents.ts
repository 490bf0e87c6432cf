// A company's configured agents: configure one, list them, change one (a
// paused agent cannot start runs).
import { z } from 'zod';
import { createCompanyAgent, listCompanyAgents, updateCompanyAgent } from '../../../core/companies/companies.ts';
import { PlatformError } from '../../errors.ts';
import { type CompanyApp, CompanyParams, type CompanyRouteContext, mapped, notFound } from './context.ts';
import { AgentBody, AgentPatch, CompanyAgent, CompanyAgentPage, PageQuery, toAgent } from './schemas.ts';

export function registerCompanyAgentRoutes(
  app: CompanyApp,
  { viewer, admin, errors, doc, company }: CompanyRouteContext,
): void {
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
}
