// Activity (Tenant + Viewer, GET only): what the tenant's agents did, read
// from the tables that record it, keyset-paged. /api/activity/channels lives
// with the channels (api/routes/channels).
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { activityRouteContext } from './context.ts';
import { registerActivityListRoutes } from './lists.ts';
import { registerActivitySessionRoutes } from './sessions.ts';
import { registerActivityToolRoutes } from './tools.ts';

const activityRoutes: FastifyPluginAsyncZod = async (app) => {
  const context = activityRouteContext(app);
  registerActivitySessionRoutes(app, context);
  registerActivityToolRoutes(app, context);
  registerActivityListRoutes(app, context);
};

export default activityRoutes;
