// Switching a linked channel on and off, and disconnecting it (credentials
// and binding go at once; undoing the registration at the channel is a job).
import { z } from 'zod';
import { disconnectChannel } from '../../../core/channels/disconnect.ts';
import { switchChannel } from '../../../core/channels/store.ts';
import { PlatformError, PlatformHttpError } from '../../errors.ts';
import { type ChannelApp, type ChannelRouteContext, channelOr404 } from './context.ts';
import { ChannelParams, ChannelStatus, toStatus } from './schemas.ts';

export function registerChannelSwitchRoutes(
  app: ChannelApp,
  { admin, errors, base, keyring }: ChannelRouteContext,
): void {
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
}
