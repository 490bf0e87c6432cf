// The OpenAPI 3.1 document is generated from the route schemas (zod through
// fastify-type-provider-zod and @fastify/swagger); no path is written by hand.
import swagger from '@fastify/swagger';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { jsonSchemaTransform, jsonSchemaTransformObject } from 'fastify-type-provider-zod';

async function openapi(app: FastifyInstance) {
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Agent platform API',
        version: '1.0.0',
        description: 'Agent API, identity provider and platform API of the agent platform.',
      },
      servers: [{ url: app.config.baseUrl }],
      components: {
        securitySchemes: {
          PlatformJWT: {
            type: 'http',
            scheme: 'bearer',
            bearerFormat: 'JWT',
            description: 'Platform token from POST /api/auth/login (15 minutes; renew with POST /api/auth/refresh)',
          },
          AgentBearer: {
            type: 'http',
            scheme: 'bearer',
            bearerFormat: 'JWT',
            description: 'Access token from POST {auth_url}/oauth2/token (JWT-bearer grant, resource {base_url}/api/agent), about 5 minutes; auth class agent_bearer',
          },
          RunnerToken: {
            type: 'http',
            scheme: 'bearer',
            description: 'Runner token from POST /api/runners/enroll (shown once)',
          },
          DashboardJWT: {
            type: 'http',
            scheme: 'bearer',
            bearerFormat: 'JWT',
            description: 'Dashboard token from POST /api/dashboard/auth/login or /totp-login',
          },
        },
      },
    },
    transform: jsonSchemaTransform,
    transformObject: jsonSchemaTransformObject,
  });
}

export default fp(openapi, { name: 'openapi', dependencies: ['context'] });
