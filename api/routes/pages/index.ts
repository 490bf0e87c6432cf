// Pages for people: the landing page, a person's sign-in (/account) and the
// API reference UI. (The HTML
// 404 is the app's not-found handler, api/plugins/errors.ts; the shared
// layout is api/pages/layout.ts.) None of these routes is in the OpenAPI
// document.
import type { FastifyPluginAsync } from 'fastify';
import accountRoutes from './account.ts';
import docsRoutes from './docs.ts';
import landingRoutes from './landing.ts';

const pageRoutes: FastifyPluginAsync = async (app) => {
  await app.register(landingRoutes);
  await app.register(accountRoutes);
  await app.register(docsRoutes);
};

export default pageRoutes;
