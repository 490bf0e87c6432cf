// Linking a channel: start it, long-poll until its state changes, and read
// the channel's jobs (link, deliver, disconnect) that the link answers point to.
import { z } from 'zod';
import { CHANNEL_JOB_KINDS, channelQueue, LinkRefusedError, startLink } from '../../../core/channels/linking.ts';
import { findLink } from '../../../core/channels/store.ts';
import type { ChannelState } from '../../../core/channels/types.ts';
import { sql } from '../../../core/db/pool.ts';
import { JobRow, JobStatus, toJobStatus } from '../../../core/jobs/schema.ts';
import { PlatformError, PlatformHttpError } from '../../errors.ts';
import { answerRaw, CROWD } from './broadcast-answer.ts';
import { type ChannelApp, type ChannelRouteContext, channelOr404 } from './context.ts';
import { ChannelParams, LinkStarted, LinkWaited } from './schemas.ts';

const WAIT_DEFAULT_S = 25;
const WAIT_MAX_S = 60;
const JSON_TYPE = 'application/json; charset=utf-8';

export function registerChannelLinkRoutes(app: ChannelApp, context: ChannelRouteContext): void {
  registerStartLinkRoute(app, context);
  registerLinkWaitRoute(app, context);
  registerChannelJobRoute(app, context);
}

function registerStartLinkRoute(app: ChannelApp, { admin, errors, base, keyring }: ChannelRouteContext): void {
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
}

function registerLinkWaitRoute(app: ChannelApp, { admin, errors, base, waiters }: ChannelRouteContext): void {
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
}

function registerChannelJobRoute(app: ChannelApp, { admin, errors, base }: ChannelRouteContext): void {
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
}
