// GET /openapi.json and /openapi.yaml: the same generated document.
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';

const openapiRoutes: FastifyPluginAsyncZod = async (app) => {
  app.get('/openapi.json', { schema: { hide: true } }, async (_request, reply) =>
    reply.type('application/json; charset=utf-8').send(app.swagger()),
  );
  app.get('/openapi.yaml', { schema: { hide: true } }, async (_request, reply) =>
    reply.type('application/yaml; charset=utf-8').send(app.swagger({ yaml: true })),
  );
};

export default openapiRoutes;
