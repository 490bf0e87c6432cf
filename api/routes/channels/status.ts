// Reading the channels: every supported one with its status, and the
// detailed status of one.
import { z } from 'zod';
import { CHANNELS } from '../../../core/channels/registry.ts';
import { findLink, linkRow } from '../../../core/channels/store.ts';
import { type ChannelApp, type ChannelRouteContext, channelOr404 } from './context.ts';
import { ChannelParams, ChannelStatus, ChannelSummary, toStatus } from './schemas.ts';

export function registerChannelStatusRoutes(app: ChannelApp, { viewer, errors, base }: ChannelRouteContext): void {
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
}
