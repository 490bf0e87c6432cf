// Connected partner accounts: the connect flow under /oauth/partner/* and
// the person's accounts under /api/partner-accounts/.
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import accountRoutes from './accounts.ts';
import oauthRoutes from './oauth.ts';

const partnerAccountRoutes: FastifyPluginAsyncZod = async (app) => {
  await app.register(oauthRoutes);
  await app.register(accountRoutes);
};

export default partnerAccountRoutes;
