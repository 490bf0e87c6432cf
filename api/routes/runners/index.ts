// Runners (platform API): tenant Admins enroll runners and switch run
// execution; a runner authenticates with its own token (shown once at
// enrollment) to send heartbeats and acknowledge the work they return.
// Listing, reading and revoking runners live in ./registry.ts.
import type { FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { bearerToken } from '../../../core/auth/platform-token.ts';
import {
  acknowledgeWork,
  enrollRunner,
  heartbeat,
  runExecutionEnabled,
  runnerByToken,
  RunnerRevokedError,
  setRunExecutionEnabled,
  type RunnerIdentity,
} from '../../../core/runners/runners.ts';
import { nameSchema } from '../../../core/names.ts';
import { PlatformError, PlatformHttpError } from '../../errors.ts';
import { TenantHeaders } from '../../plugins/tenant.ts';
import runnerRegistryRoutes from './registry.ts';

const Enrolled = z
  .object({
    runnerId: z.uuid(),
    token: z
      .string()
      .describe('The runner token, shown only now; the runner sends it as `Authorization: Bearer <token>`'),
  })
  .meta({ id: 'RunnerEnrollment' });
const PendingWork = z.object({
  id: z.uuid(),
  kind: z.literal('agent.restore'),
  managedAgentId: z.uuid(),
  agentName: z.string(),
  jobId: z.uuid(),
  createdAt: z.iso.datetime(),
});
const HeartbeatResponse = z
  .object({ pendingWork: z.array(PendingWork), heartbeatIntervalSeconds: z.int().min(1) })
  .meta({ id: 'RunnerHeartbeatResponse' });
const WorkAck = z
  .object({
    id: z.uuid(),
    state: z.enum(['pending', 'acknowledged', 'done']),
    acknowledgedAt: z.iso.datetime().nullable(),
  })
  .meta({ id: 'RunnerWorkAck' });
const AgentSettings = z.object({ runExecutionEnabled: z.boolean() }).meta({ id: 'TenantAgentSettings' });

const RUNNER_AUTH = 'Authenticated with the runner token: `Authorization: Bearer <runner token>`.';
const HEARTBEAT_INTERVAL_S = 5;

declare module 'fastify' {
  interface FastifyRequest {
    runner: RunnerIdentity | null;
  }
}

const runnerRoutes: FastifyPluginAsyncZod = async (app) => {
  const security = [{ PlatformJWT: [] }];
  const admin = { onRequest: app.requireUser, preValidation: app.requireTenant('admin') };
  const errors = { 400: PlatformError, 401: PlatformError, 403: PlatformError, 404: PlatformError };

  app.decorateRequest('runner', null);
  const unauthorized = () =>
    new PlatformHttpError(
      401,
      'unauthorized',
      'Send the runner token from enrollment as `Authorization: Bearer <token>`.',
    );
  const requireRunner = async (request: FastifyRequest) => {
    const token = bearerToken(request.headers.authorization);
    const runner = token ? await runnerByToken(app.db, token) : null;
    if (!runner) throw unauthorized();
    request.runner = runner;
  };
  // A revoke that lands between the token check and the write answers like a revoked token.
  const asRunner = async <T>(work: () => Promise<T>): Promise<T> => {
    try {
      return await work();
    } catch (error) {
      if (error instanceof RunnerRevokedError) throw unauthorized();
      throw error;
    }
  };

  await app.register(runnerRegistryRoutes);

  app.post(
    '/api/runners/enroll',
    {
      ...admin,
      schema: {
        operationId: 'enrollRunner',
        tags: ['runners'],
        summary: 'Enroll a runner; its token is returned once',
        security,
        headers: TenantHeaders,
        body: z.object({ name: nameSchema().default('runner') }),
        response: { 201: Enrolled, ...errors },
      },
    },
    async (request, reply) => {
      const enrolled = await enrollRunner(app.db, request.tenant!.id, request.body.name);
      request.log.info({ runnerId: enrolled.runnerId, tenantId: request.tenant!.id }, 'runner enrolled');
      return reply.code(201).send(enrolled);
    },
  );

  app.post(
    '/api/runners/heartbeat',
    {
      onRequest: requireRunner,
      schema: {
        operationId: 'runnerHeartbeat',
        security: [{ RunnerToken: [] }],
        tags: ['runners'],
        summary: `Record a heartbeat; returns the pending work. ${RUNNER_AUTH}`,
        body: z.object({ gatewayConnected: z.boolean() }),
        response: { 200: HeartbeatResponse, 400: PlatformError, 401: PlatformError },
      },
    },
    async (request) => {
      const work = await asRunner(() => heartbeat(app.db, request.runner!, request.body.gatewayConnected));
      return {
        pendingWork: work.map((w) => ({
          id: w.id,
          kind: w.kind,
          managedAgentId: w.managed_agent_id,
          agentName: w.agent_name,
          jobId: w.job_id,
          createdAt: w.created_at,
        })),
        heartbeatIntervalSeconds: HEARTBEAT_INTERVAL_S,
      };
    },
  );

  app.post(
    '/api/runners/work/:workId/ack',
    {
      onRequest: requireRunner,
      schema: {
        operationId: 'acknowledgeRunnerWork',
        security: [{ RunnerToken: [] }],
        tags: ['runners'],
        summary: `Acknowledge work from a heartbeat (repeatable). ${RUNNER_AUTH}`,
        params: z.object({ workId: z.uuid() }),
        response: { 200: WorkAck, 400: PlatformError, 401: PlatformError, 404: PlatformError },
      },
    },
    async (request) => {
      const work = await asRunner(() => acknowledgeWork(app.db, request.runner!, request.params.workId));
      if (!work) throw new PlatformHttpError(404, 'not_found', 'No such work for this runner.');
      return { id: work.id, state: work.state, acknowledgedAt: work.acknowledged_at };
    },
  );

  app.get(
    '/api/tenants/agent-settings',
    {
      ...admin,
      schema: {
        operationId: 'getTenantAgentSettings',
        tags: ['runners'],
        summary: 'Agent execution settings of the tenant',
        security,
        headers: TenantHeaders,
        response: { 200: AgentSettings, ...errors },
      },
    },
    async (request) => ({ runExecutionEnabled: await runExecutionEnabled(app.db, request.tenant!.id) }),
  );

  app.put(
    '/api/tenants/agent-settings',
    {
      ...admin,
      schema: {
        operationId: 'putTenantAgentSettings',
        tags: ['runners'],
        summary: 'Switch run execution of the tenant on or off',
        security,
        headers: TenantHeaders,
        body: AgentSettings,
        response: { 200: AgentSettings, ...errors },
      },
    },
    async (request) => {
      await setRunExecutionEnabled(app.db, request.tenant!.id, request.body.runExecutionEnabled);
      request.log.info(
        { tenantId: request.tenant!.id, runExecutionEnabled: request.body.runExecutionEnabled },
        'run execution switched',
      );
      return { runExecutionEnabled: request.body.runExecutionEnabled };
    },
  );
};

export default runnerRoutes;
