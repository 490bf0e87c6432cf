// Company work for people (extension of the spec's platform API): companies,
// their configured agents and tasks, and starting a run of a task by an agent
// (202: the run executes as a job; follow it at GET /api/jobs/:jobId).
// Admins write, Viewers read; everything acts in the x-tenant-id tenant.
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { registerCompanyAgentRoutes } from './agents.ts';
import { registerCompanyRoutes } from './companies.ts';
import { companyRouteContext } from './context.ts';
import { registerCompanyRunRoutes } from './runs.ts';
import { registerCompanyTaskRoutes } from './tasks.ts';

const companyRoutes: FastifyPluginAsyncZod = async (app) => {
  const context = companyRouteContext(app);
  registerCompanyRoutes(app, context);
  registerCompanyAgentRoutes(app, context);
  registerCompanyTaskRoutes(app, context);
  registerCompanyRunRoutes(app, context);
};

export default companyRoutes;
