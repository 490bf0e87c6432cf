// GET /api/activity/channels: each configured channel of the tenant with its
// state and traffic (inbound/outbound counts, last of each, last error), in
// keyset pages by when the channel was first configured.
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { CHANNEL_STATES } from '../../../core/channels/types.ts';
import { sql } from '../../../core/db/pool.ts';
import { pageOf, PageQuery } from '../../../core/paging.ts';
import { PlatformError, platformCursor } from '../../errors.ts';
import { TenantHeaders } from '../../plugins/tenant.ts';

const Row = z.object({
  id: z.string(),
  cursor_t: z.string(),
  channel: z.string(),
  state: z.enum(CHANNEL_STATES),
  linked_at: z.string().nullable(),
  inbound_count: z.number(),
  outbound_count: z.number(),
  last_inbound_at: z.string().nullable(),
  last_outbound_at: z.string().nullable(),
  last_error: z.string().nullable(),
  last_error_at: z.string().nullable(),
  created_at: z.string(),
});

const ChannelActivity = z
  .object({
    channel: z.string(),
    status: z.enum(CHANNEL_STATES),
    linkedAt: z.iso.datetime().nullable(),
    inboundCount: z.int(),
    outboundCount: z.int(),
    lastInboundAt: z.iso.datetime().nullable(),
    lastOutboundAt: z.iso.datetime().nullable(),
    lastError: z.string().nullable(),
    lastErrorAt: z.iso.datetime().nullable(),
    createdAt: z.iso.datetime(),
  })
  .meta({ id: 'ChannelActivity' });

const iso = (v: string | null) => (v === null ? null : new Date(v).toISOString());

const channelActivityRoutes: FastifyPluginAsyncZod = async (app) => {
  app.get(
    '/api/activity/channels',
    {
      onRequest: app.requireUser,
      preValidation: app.requireTenant('viewer'),
      schema: {
        operationId: 'listChannelActivity',
        tags: ['activity'],
        summary: 'Channel activity: state, inbound/outbound counts, last of each, last error',
        security: [{ PlatformJWT: [] }],
        headers: TenantHeaders,
        querystring: PageQuery,
        response: {
          200: z
            .object({ items: z.array(ChannelActivity), nextCursor: z.string().nullable() })
            .meta({ id: 'ChannelActivityPage' }),
          400: PlatformError,
          401: PlatformError,
          403: PlatformError,
          404: PlatformError,
        },
      },
    },
    async (request) => {
      const { limit, cursor } = request.query;
      const p = platformCursor(cursor);
      const after = p ? sql.fragment`(created_at, id) > (${p.t}::timestamptz, ${p.id}::uuid)` : sql.fragment`true`;
      const rows = await app.db.any(sql.type(Row)`
      select id, created_at::text as cursor_t, channel, state, linked_at, inbound_count, outbound_count, last_inbound_at, last_outbound_at,
        last_error, last_error_at, created_at
      from channel_links where tenant_id = ${request.tenant!.id} and ${after}
      order by created_at, id limit ${limit + 1}`);
      const page = pageOf(rows, limit);
      return {
        items: page.items.map((r) => ({
          channel: r.channel,
          status: r.state,
          linkedAt: iso(r.linked_at),
          inboundCount: r.inbound_count,
          outboundCount: r.outbound_count,
          lastInboundAt: iso(r.last_inbound_at),
          lastOutboundAt: iso(r.last_outbound_at),
          lastError: r.last_error,
          lastErrorAt: iso(r.last_error_at),
          createdAt: iso(r.created_at)!,
        })),
        nextCursor: page.nextCursor,
      };
    },
  );
};

export default channelActivityRoutes;
