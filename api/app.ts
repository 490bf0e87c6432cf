// buildApp: the whole HTTP edge as a Fastify instance. Tests call it and use
// app.inject; api/server.ts and ops/start.ts call it and listen.
import { randomUUID } from 'node:crypto';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import pino, { type DestinationStream } from 'pino';
import { serializerCompiler, validatorCompiler, type ZodTypeProvider } from 'fastify-type-provider-zod';
import { loggerOptions } from '../core/logger.ts';
import context, { type AppContext } from './plugins/context.ts';
import { clientErrorHandler, frameworkErrors } from './plugins/framework-errors.ts';
import inputGuard from './plugins/input-guard.ts';
import errors from './plugins/errors.ts';
import openapi from './plugins/openapi.ts';
import operations from './plugins/operations.ts';
import platformAuth from './plugins/platform-auth.ts';
import rateLimit from './plugins/rate-limit.ts';
import tenant from './plugins/tenant.ts';
import authRoutes from './routes/auth/index.ts';
import agentAuth from './plugins/agent-auth.ts';
import agentAdmission from './plugins/agent-admission.ts';
import agentIdempotency from './plugins/agent-idempotency.ts';
import agentIdentityRoutes from './routes/agent/identity.ts';
import agentCompanyRoutes from './routes/agent/companies.ts';
import companyRoutes from './routes/companies/index.ts';
import agentBoardRoutes from './routes/agent/boards.ts';
import boardRoutes from './routes/boards/index.ts';
import managedAgentRoutes from './routes/agent/managed-agents.ts';
import agentJobRoutes from './routes/agent/jobs.ts';
import managedAgentPlatformRoutes from './routes/managed-agents/index.ts';
import runnerRoutes from './routes/runners/index.ts';
import chatRoutes from './routes/chat/index.ts';
import contactRoutes from './routes/contact/index.ts';
import identityRoutes from './routes/identity/index.ts';
import dashboardRoutes from './routes/dashboard/index.ts';
import usageRoutes from './routes/usage/index.ts';
import billingPlugin from './plugins/billing.ts';
import billingSandboxPages from './routes/billing/sandbox-pages.ts';
import purchaseRoutes from './routes/billing/purchase.ts';
import stripeBillingRoutes from './routes/billing/stripe.ts';
import stripeWebhookRoutes from './routes/billing/webhook.ts';
import billingStatusRoutes from './routes/billing/status.ts';
import onboardingRoutes from './routes/onboarding/index.ts';
import providerKeyRoutes from './routes/provider-keys/index.ts';
import healthRoutes from './routes/health/index.ts';
import agentRegistrationRoutes from './routes/tenants/agent-registrations.ts';
import tenantRoutes from './routes/tenants/index.ts';
import teamRoutes from './routes/teams/index.ts';
import invitationAcceptRoutes from './routes/teams/accept.ts';
import invitationPageRoutes from './routes/teams/accept-page.ts';
import jobRoutes from './routes/jobs/index.ts';
import authGuideRoute from './routes/public/auth-guide.ts';
import openapiRoutes from './routes/public/openapi.ts';
import contractRoutes from './routes/contracts/index.ts';
import mcpRoutes from './routes/mcp/index.ts';
import wsRoutes from './routes/ws/index.ts';
import pageRoutes from './routes/pages/index.ts';
import consoleRoutes from './routes/console/index.ts';
import channelRoutes from './routes/channels/index.ts';
import channelInboundRoutes from './routes/channels/inbound.ts';
import channelActivityRoutes from './routes/channels/activity.ts';
import memoryRoutes from './routes/memory/index.ts';
import skillRoutes from './routes/skills/index.ts';
import activityRoutes from './routes/activity/index.ts';
import activityToolCounter from './routes/activity/tool-counter.ts';
import partnerAccountRoutes from './routes/partner-accounts/index.ts';

const REQUEST_ID = /^[A-Za-z0-9._-]{1,64}$/;

export type BuildOptions = {
  /** Where log lines go (stdout by default); tests pass a stream to read them. */
  logStream?: DestinationStream;
};

export async function buildApp(ctx: AppContext, options: BuildOptions = {}): Promise<FastifyInstance> {
  const logger: FastifyBaseLogger = options.logStream
    ? pino(loggerOptions(ctx.config.logLevel, 'api'), options.logStream)
    : pino(loggerOptions(ctx.config.logLevel, 'api'));
  const app = Fastify({
    loggerInstance: logger,
    // One line per request instead of Fastify's two (operations.ts logs it;
    // errors are logged by the error handlers, errors.ts).
    logController: new LogController({ disableRequestLogging: true }),
    trustProxy: ctx.config.trustProxy,
    bodyLimit: 1024 * 1024,
    // The Agent API's taskRef may be 2048 characters, more when URL-encoded (Fastify's default is 100).
    routerOptions: { maxParamLength: 8192 },
    // Keep a well-formed incoming request id for tracing; mint one otherwise.
    requestIdHeader: false,
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
    },
    return503OnClosing: true,
    // Finite limits, so slow or idle clients cannot hold sockets for ever:
    // the whole request must arrive within requestTimeout (a body trickled
    // byte by byte is cut with 408), idle sockets close after
    // connectionTimeout, and a keep-alive socket serves a bounded number of
    // requests. Websockets are exempt once upgraded (ws clears the timeout).
    requestTimeout: ctx.config.http.requestTimeoutMs,
    connectionTimeout: ctx.config.http.connectionTimeoutMs,
    keepAliveTimeout: ctx.config.http.keepAliveTimeoutMs,
    maxRequestsPerSocket: ctx.config.http.maxRequestsPerSocket,
    http: {
      // Node checks for overdue requests on this interval (30 s by default),
      // so a short requestTimeout needs a finer check to mean what it says.
      connectionsCheckingInterval: Math.min(30_000, Math.max(250, Math.floor(ctx.config.http.requestTimeoutMs / 4))),
      headersTimeout: Math.min(60_000, ctx.config.http.requestTimeoutMs),
    },
    ajv: { customOptions: { coerceTypes: false } },
    // Bad URLs and unparseable HTTP answer in our shapes too (see the module).
    frameworkErrors,
    clientErrorHandler,
  }).withTypeProvider<ZodTypeProvider>();

  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  // An empty body is no body, also under `content-type: application/json`
  // (clients send the header on a DELETE too): Fastify's parser refuses it.
  // A route that needs a body then says so in its own validation error.
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    if (body === '') return done(null, undefined);
    // Fastify's own parser answers through done (its type also allows a promise).
    void parseJson(request, body as string, done);
  });
  // No route takes plain text: without Fastify's built-in text/plain parser a
  // JSON body sent as text/plain gets the 415 that names the right header,
  // instead of a validation error about a string.
  app.removeContentTypeParser('text/plain');
  // Hooks that every request runs and that wait for nothing take a callback:
  // an async one costs every request a promise and its async-hook bookkeeping.
  app.addHook('onSend', (request, reply, payload, done) => {
    reply.header('x-request-id', request.id);
    done(null, payload);
  });

  await app.register(context, ctx);
  await app.register(errors);
  await app.register(inputGuard);
  await app.register(openapi);
  await app.register(operations);
  await app.register(platformAuth);
  await app.register(tenant);
  await app.register(rateLimit);
  await app.register(agentAuth);
  await app.register(agentIdempotency);
  await app.register(agentAdmission);
  await app.register(activityToolCounter);

  await app.register(healthRoutes);
  await app.register(openapiRoutes);
  await app.register(authGuideRoute);
  await app.register(contractRoutes);
  await app.register(jobRoutes);
  await app.register(authRoutes);
  await app.register(tenantRoutes);
  await app.register(agentRegistrationRoutes);
  await app.register(teamRoutes);
  await app.register(invitationAcceptRoutes);
  await app.register(invitationPageRoutes);
  await app.register(contactRoutes);
  await app.register(dashboardRoutes);
  await app.register(usageRoutes);
  await app.register(billingPlugin);
  await app.register(billingStatusRoutes);
  await app.register(stripeBillingRoutes);
  await app.register(stripeWebhookRoutes);
  await app.register(purchaseRoutes);
  await app.register(billingSandboxPages);
  await app.register(providerKeyRoutes);
  await app.register(onboardingRoutes);
  await app.register(chatRoutes);
  await app.register(channelRoutes);
  await app.register(channelInboundRoutes);
  await app.register(channelActivityRoutes);
  await app.register(identityRoutes);
  await app.register(agentIdentityRoutes);
  await app.register(companyRoutes);
  await app.register(agentCompanyRoutes);
  await app.register(agentBoardRoutes);
  await app.register(boardRoutes);
  await app.register(managedAgentRoutes);
  await app.register(agentJobRoutes);
  await app.register(managedAgentPlatformRoutes);
  await app.register(runnerRoutes);
  await app.register(mcpRoutes);
  // biome-ignore lint/nursery/noMisusedPromises: register takes async plugins (FastifyPluginAsync); Biome picks its callback overload
  await app.register(wsRoutes);
  await app.register(pageRoutes);
  await app.register(consoleRoutes);
  await app.register(memoryRoutes);
  await app.register(skillRoutes);
  await app.register(activityRoutes);
  await app.register(partnerAccountRoutes);

  await app.ready();
  return app;
}
