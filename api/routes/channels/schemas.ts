import { z } from 'zod';
import { CHANNEL_IDS, CHANNELS } from '../../../core/channels/registry.ts';
import { CHANNEL_STATES } from '../../../core/channels/types.ts';
import type { LinkRow } from '../../../core/channels/store.ts';

export const ChannelParams = z.object({
  channel: z
    .string()
    .min(1)
    .max(40)
    .describe(`A messaging channel: ${CHANNEL_IDS.join(', ')}`),
});

export const ChannelSummary = z
  .object({
    channel: z.string(),
    title: z.string(),
    linkKind: z.enum(['url', 'session_token']).describe('What POST /link hands out'),
    status: z.enum(CHANNEL_STATES),
    configured: z.boolean().describe('Every setting a link needs is stored'),
    linkedAt: z.iso.datetime().nullable(),
  })
  .meta({ id: 'ChannelSummary' });

export const ChannelStatus = ChannelSummary.extend({
  account: z
    .record(z.string(), z.unknown())
    .nullable()
    .describe('The linked account or chat (bot, chat id, workspace)'),
  linkExpiresAt: z.iso.datetime().nullable().describe('While linking: when the link stops working'),
  lastInboundAt: z.iso.datetime().nullable(),
  lastOutboundAt: z.iso.datetime().nullable(),
  lastError: z.string().nullable(),
  lastErrorAt: z.iso.datetime().nullable(),
  inboundCount: z.int(),
  outboundCount: z.int(),
}).meta({ id: 'ChannelStatus' });

export const LinkStarted = z
  .object({
    jobId: z.uuid().describe('The channel.link job: GET /api/channels/:channel/jobs/:jobId'),
    linkUrl: z.url().optional().describe('telegram, slack: the URL the person opens'),
    sessionToken: z.string().optional().describe('webhook: send it once as `sessionToken` in an inbound message'),
    expiresAt: z.iso.datetime(),
  })
  .meta({ id: 'ChannelLinkStarted' });

export const LinkWaited = z
  .object({
    channel: z.string(),
    status: z.enum(CHANNEL_STATES),
    changed: z.boolean().describe('False when the wait timed out (or nothing was pending)'),
  })
  .meta({ id: 'ChannelLinkWait' });

export const MaskedSecret = z.object({
  set: z.boolean(),
  masked: z.string().nullable().describe('Last four characters only'),
});
export const ChannelConfig = z
  .object({
    channel: z.string(),
    config: z.record(z.string(), z.string()).describe('Settings that are not secret'),
    secrets: z.record(z.string(), MaskedSecret).describe('Secrets are never returned: whether each is set, masked'),
    inboundUrl: z
      .url()
      .nullable()
      .describe('Where the channel sends inbound requests (Slack Events URL, webhook target)'),
    redirectUrl: z.url().optional().describe('slack: the OAuth redirect URL to register in the app'),
  })
  .meta({ id: 'ChannelConfig' });

export const ConfigBody = z.union(
  CHANNELS.map((c) =>
    c.configSchema.strict().meta({ id: `${c.title.split(' ')[0]}ChannelConfigInput` }),
  ) as unknown as [z.ZodObject, z.ZodObject],
);

const iso = (v: string | null) => (v === null ? null : new Date(v).toISOString());
export const statusOf = (row: LinkRow | null) => row?.state ?? 'not_linked';

export function toStatus(
  adapter: { id: string; title: string; linkKind: 'url' | 'session_token'; requiredForLink: readonly string[] },
  row: LinkRow | null,
) {
  return {
    channel: adapter.id,
    title: adapter.title,
    linkKind: adapter.linkKind,
    status: statusOf(row),
    configured: adapter.requiredForLink.every((f) => !!(row?.config[f] ?? row?.secrets[f])),
    linkedAt: iso(row?.linked_at ?? null),
    account: row?.account ?? null,
    linkExpiresAt: row?.state === 'linking' ? iso(row.link_expires_at) : null,
    lastInboundAt: iso(row?.last_inbound_at ?? null),
    lastOutboundAt: iso(row?.last_outbound_at ?? null),
    lastError: row?.last_error ?? null,
    lastErrorAt: iso(row?.last_error_at ?? null),
    inboundCount: row?.inbound_count ?? 0,
    outboundCount: row?.outbound_count ?? 0,
  };
}
