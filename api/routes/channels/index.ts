// Messaging channels (telegram, slack, webhook): statuses, link and its
// long-poll, enable/disable/disconnect, per-channel settings and the
// channel's jobs. Inbound requests from the channels are in inbound.ts.
import fp from 'fastify-plugin';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { disconnectChannel } from '../../../core/channels/disconnect.ts';
import {
  CHANNEL_JOB_KINDS,
  channelQueue,
  inboundUrl,
  LinkRefusedError,
  startLink,
} from '../../../core/channels/linking.ts';
import { adapterFor, CHANNEL_IDS, CHANNELS } from '../../../core/channels/registry.ts';
import { slackRedirectUri } from '../../../core/channels/slack.ts';
import { findLink, linkRow, maskedConfig, saveConfig, switchChannel } from '../../../core/channels/store.ts';
import type { ChannelAdapter, ChannelState } from '../../../core/channels/types.ts';
import { LinkWaiters } from '../../../core/channels/waiters.ts';
import { Keyring } from '../../../core/crypto/keyring.ts';
import { sql } from '../../../core/db/pool.ts';
import { JobRow, JobStatus, toJobStatus } from '../../../core/jobs/schema.ts';
import { tenantBaseUrlProblem } from '../../../core/providers/outbound.ts';
import { PlatformError, PlatformHttpError } from '../../errors.ts';
import { TenantHeaders } from '../../plugins/tenant.ts';
import { answerRaw, CROWD } from './broadcast-answer.ts';
import {
  ChannelConfig,
  ChannelParams,
  ChannelStatus,
  ChannelSummary,
  ConfigBody,
  LinkStarted,
  LinkWaited,
  toStatus,
} from './schemas.ts';

declare module 'fastify' {
  interface FastifyInstance {
    /** This process's link/wait waiters (tests count them). */
    channelWaiters: LinkWaiters;
  }
}

const WAIT_DEFAULT_S = 25;
const WAIT_MAX_S = 60;
const JSON_TYPE = 'application/json; charset=utf-8';

export function channelOr404(channel: string): ChannelAdapter {
  const adapter = adapterFor(channel);
  if (!adapter)
    throw new PlatformHttpError(
      404,
      'not_found',
      `No channel "${channel}". Supported channels: ${CHANNEL_IDS.join(', ')}.`,
    );
  return adapter;
}

const channelRoutes: FastifyPluginAsyncZod = async (app) => {
  const security = [{ PlatformJWT: [] }];
  const viewer = { onRequest: app.requireUser, preValidation: app.requireTenant('viewer') };
  const admin = { onRequest: app.requireUser, preValidation: app.requireTenant('admin') };
  const errors = { 400: PlatformError, 401: PlatformError, 403: PlatformError, 404: PlatformError };
  const keyring = Keyring.fromConfig(app.config);
  const waiters = new LinkWaiters(app.jobEvents);
  await waiters.start();
  app.decorate('channelWaiters', waiters);
  const base = { tags: ['channels'], security, headers: TenantHeaders };

  app.get(
    '/api/channels/',
    {
      ...viewer,
      schema: {
        ...base,
        operationId: 'listChannels',
        summary: 'Every supported channel and its status',
        response: { 200: z.object({ items: z.array(ChannelSummary) }).meta({ id: 'ChannelList' }), ...errors },
      },
    },
    async (request) => {
      const rows = await app.db.any(linkRow`select * from channel_links where tenant_id = ${request.tenant!.id}`);
      const byChannel = new Map(rows.map((r) => [r.channel, r]));
      return {
        items: CHANNELS.map((adapter) => {
          const s = toStatus(adapter, byChannel.get(adapter.id) ?? null);
          return {
            channel: s.channel,
            title: s.title,
            linkKind: s.linkKind,
            status: s.status,
            configured: s.configured,
            linkedAt: s.linkedAt,
          };
        }),
      };
    },
  );

  app.get(
    '/api/channels/:channel/status',
    {
      ...viewer,
      schema: {
        ...base,
        operationId: 'getChannelStatus',
        summary: 'Detailed status: linked account, since, last inbound/outbound, last error',
        params: ChannelParams,
        response: { 200: ChannelStatus, ...errors },
      },
    },
    async (request) => {
      const adapter = channelOr404(request.params.channel);
      return toStatus(adapter, await findLink(app.db, request.tenant!.id, adapter.id));
    },
  );

  app.post(
    '/api/channels/:channel/link',
    {
      ...admin,
      schema: {
        ...base,
        operationId: 'startChannelLink',
        summary: 'Start linking; a link URL (telegram, slack) or a session token (webhook)',
        params: ChannelParams,
        response: { 202: LinkStarted, ...errors, 409: PlatformError, 429: PlatformError },
      },
    },
    async (request, reply) => {
      const adapter = channelOr404(request.params.channel);
      try {
        const started = await startLink(app.db, keyring, app.config, adapter, request.tenant!.id, request.user!.userId);
        return reply
          .code(202)
          .header('location', `/api/channels/${adapter.id}/jobs/${started.jobId}`)
          .send({ ...started, expiresAt: new Date(started.expiresAt).toISOString() });
      } catch (error) {
        if (error instanceof LinkRefusedError)
          throw new PlatformHttpError(409, 'channel_not_configured', error.message);
        throw error;
      }
    },
  );

  // One link wakes every waiter of its tenant's channel at once (a thousand,
  // say), all with the same answer: it is checked and serialized once.
  const wakeBodies = new Map<string, string>();
  const wakeBody = (channel: string, status: string, changed: boolean): string => {
    const key = `${channel}:${status}:${changed}`;
    let body = wakeBodies.get(key);
    if (body === undefined) {
      body = JSON.stringify(LinkWaited.parse({ channel, status, changed }));
      wakeBodies.set(key, body);
    }
    return body;
  };

  app.get(
    '/api/channels/:channel/link/wait',
    {
      ...admin,
      schema: {
        ...base,
        operationId: 'waitChannelLink',
        summary: 'Long-poll: answers when the link state changes, or at the timeout with the current state',
        params: ChannelParams,
        querystring: z.object({
          timeout: z.coerce
            .number()
            .int()
            .min(0)
            .max(WAIT_MAX_S)
            .default(WAIT_DEFAULT_S)
            .describe(`Seconds, at most ${WAIT_MAX_S}`),
        }),
        response: { 200: LinkWaited, ...errors },
      },
    },
    async (request, reply) => {
      const adapter = channelOr404(request.params.channel);
      const tenantId = request.tenant!.id;
      let current: ChannelState | null = null;
      // The waiter is in place before the read, so a change right after the read still wakes it.
      const { woken, cancel } = waiters.wait(tenantId, adapter.id, request.query.timeout * 1000, (wake) => {
        // A crowd is answered inside the wake-up loop, straight to the sockets
        // (broadcast-answer.ts): the last of them need not wait for every
        // other one's trip through the framework. Not before the read below.
        if (current === null || wake.crowd < CROWD) return false;
        answerRaw(reply, wakeBody(adapter.id, wake.state, wake.state !== current), JSON_TYPE, (status) =>
          app.metrics.observeResponse(reply, status),
        );
        return true;
      });
      reply.raw.once('close', cancel); // the client went away (after an answer, a no-op)
      const row = await findLink(app.db, tenantId, adapter.id);
      current = row?.state ?? 'not_linked';
      if (current !== 'linking') {
        cancel();
        await woken;
        return { channel: adapter.id, status: current, changed: false };
      }
      const wake = await woken;
      if (wake.state) {
        if (wake.answered) return reply;
        // Already JSON: Fastify sends it as it is.
        return reply.type(JSON_TYPE).send(wakeBody(adapter.id, wake.state, wake.state !== current) as never);
      }
      // Timed out (or the LISTEN connection came back): the current state, read now.
      const now = (await findLink(app.db, tenantId, adapter.id))?.state ?? 'not_linked';
      return { channel: adapter.id, status: now, changed: now !== current };
    },
  );

  app.get(
    '/api/channels/:channel/jobs/:jobId',
    {
      ...admin,
      schema: {
        ...base,
        operationId: 'getChannelJob',
        summary: "Status and result of one of this channel's jobs (link, deliver, disconnect)",
        params: ChannelParams.extend({ jobId: z.uuid() }),
        response: { 200: JobStatus, ...errors },
      },
    },
    async (request) => {
      const adapter = channelOr404(request.params.channel);
      const tenantId = request.tenant!.id;
      const job = await app.db.maybeOne(sql.type(JobRow)`
      select id, tenant_id, kind, status, attempts, max_attempts, progress, result, error, version, created_at, started_at, finished_at, updated_at
      from jobs where id = ${request.params.jobId} and tenant_id = ${tenantId}
        and kind = any(${sql.array(CHANNEL_JOB_KINDS, 'text')}) and queue_name = ${channelQueue(tenantId, adapter.id)}`);
      if (!job) throw new PlatformHttpError(404, 'not_found', `No such ${adapter.id} job.`);
      return toJobStatus(job);
    },
  );

  for (const action of ['enable', 'disable'] as const) {
    app.post(
      `/api/channels/:channel/${action}`,
      {
        ...admin,
        schema: {
          ...base,
          operationId: `${action}Channel`,
          params: ChannelParams,
          summary:
            action === 'enable'
              ? 'Enable a linked channel: its messages become chat turns'
              : 'Stop answering messages; keep the connection',
          response: { 200: ChannelStatus, ...errors, 409: PlatformError },
        },
      },
      async (request) => {
        const adapter = channelOr404(request.params.channel);
        const row = await switchChannel(app.db, request.tenant!.id, adapter.id, action === 'enable');
        if (!row)
          throw new PlatformHttpError(
            409,
            'channel_not_linked',
            `Link ${adapter.id} first (POST /api/channels/${adapter.id}/link).`,
          );
        return toStatus(adapter, row);
      },
    );
  }

  app.post(
    '/api/channels/:channel/disconnect',
    {
      ...admin,
      schema: {
        ...base,
        operationId: 'disconnectChannel',
        summary: 'Delete the credentials and binding now; undo the registration at the channel in a job',
        params: ChannelParams,
        response: {
          202: z.object({ jobId: z.uuid(), status: z.literal('not_linked') }).meta({ id: 'ChannelDisconnected' }),
          ...errors,
        },
      },
    },
    async (request, reply) => {
      const adapter = channelOr404(request.params.channel);
      const { jobId } = await disconnectChannel(app.db, keyring, request.tenant!.id, adapter.id);
      return reply
        .code(202)
        .header('location', `/api/channels/${adapter.id}/jobs/${jobId}`)
        .send({ jobId, status: 'not_linked' as const });
    },
  );

  const configView = (adapter: ChannelAdapter, row: Awaited<ReturnType<typeof findLink>>) => ({
    channel: adapter.id,
    ...maskedConfig(adapter, row),
    inboundUrl: row?.inbound_id ? inboundUrl(app.config, adapter.id, row.inbound_id) : null,
    ...(adapter.id === 'slack' ? { redirectUrl: slackRedirectUri(app.config.baseUrl) } : {}),
  });

  app.get(
    '/api/channels/:channel/config',
    {
      ...admin,
      schema: {
        ...base,
        operationId: 'getChannelConfig',
        summary: 'Current settings; secrets masked, never returned',
        params: ChannelParams,
        response: { 200: ChannelConfig, ...errors },
      },
    },
    async (request) => {
      const adapter = channelOr404(request.params.channel);
      return configView(adapter, await findLink(app.db, request.tenant!.id, adapter.id));
    },
  );

  app.post(
    '/api/channels/:channel/config',
    {
      ...admin,
      schema: {
        ...base,
        operationId: 'updateChannelConfig',
        params: ChannelParams,
        body: ConfigBody,
        summary: 'Update settings (fields left out keep their value); secrets are sealed with AES-256-GCM',
        description:
          'telegram: botToken, botUsername. slack: clientId, clientSecret, signingSecret. webhook: callbackUrl, signingSecret.',
        response: { 200: ChannelConfig, ...errors },
      },
    },
    async (request) => {
      const adapter = channelOr404(request.params.channel);
      const parsed = adapter.configSchema.strict().safeParse(request.body);
      if (!parsed.success) {
        throw new PlatformHttpError(
          400,
          'invalid_request',
          `Invalid ${adapter.id} settings: ${parsed.error.issues.map((i) => `${i.path.join('.') || 'body'}: ${i.message}`).join('; ')}`,
        );
      }
      const input = parsed.data as Record<string, string | undefined>;
      if (input.callbackUrl) {
        const problem = await tenantBaseUrlProblem(input.callbackUrl, {
          allowPrivateUrls: app.config.providers.allowPrivateUrls,
        });
        if (problem) throw new PlatformHttpError(400, 'invalid_request', `callbackUrl is refused: ${problem}.`);
      }
      return configView(adapter, await saveConfig(app.db, keyring, adapter, request.tenant!.id, input));
    },
  );
};

// Not encapsulated: the waiter registry is visible on the app (tests, metrics).
export default fp(channelRoutes, { name: 'channel-routes' });
