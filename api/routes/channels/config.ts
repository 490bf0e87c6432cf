// A channel's settings: read them (secrets masked) and update them (secrets
// sealed), with the URLs the tenant configures at the channel's side.
import { inboundUrl } from '../../../core/channels/linking.ts';
import { slackRedirectUri } from '../../../core/channels/slack.ts';
import { findLink, maskedConfig, saveConfig } from '../../../core/channels/store.ts';
import type { ChannelAdapter } from '../../../core/channels/types.ts';
import { tenantBaseUrlProblem } from '../../../core/providers/outbound.ts';
import { PlatformHttpError } from '../../errors.ts';
import { type ChannelApp, type ChannelRouteContext, channelOr404 } from './context.ts';
import { ChannelConfig, ChannelParams, ConfigBody } from './schemas.ts';

export function registerChannelConfigRoutes(
  app: ChannelApp,
  { admin, errors, base, keyring }: ChannelRouteContext,
): void {
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
}
