// The identity provider for agents, served on {auth_url} (by default this
// same process): registration, claim ceremony, token endpoint, discovery.
import type { FastifyPluginAsync } from 'fastify';
import claimRoutes from './claim.ts';
import metadataRoutes from './metadata.ts';
import registrationRoutes from './registration.ts';
import tokenRoutes from './token.ts';

const identityRoutes: FastifyPluginAsync = async (app) => {
  await app.register(registrationRoutes);
  await app.register(claimRoutes);
  await app.register(tokenRoutes);
  await app.register(metadataRoutes);
};

export default identityRoutes;
