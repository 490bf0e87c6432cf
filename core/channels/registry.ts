// The supported channels. A new channel is an adapter file and a line here.
import type { Config } from '../config.ts';
import { guardedFetch } from '../providers/outbound.ts';
import { slack } from './slack.ts';
import { telegram } from './telegram.ts';
import type { ChannelAdapter } from './types.ts';
import { webhook } from './webhook.ts';

export const CHANNELS: readonly ChannelAdapter[] = [telegram, slack, webhook];
export const CHANNEL_IDS = CHANNELS.map((c) => c.id);

export const adapterFor = (id: string): ChannelAdapter | undefined => CHANNELS.find((c) => c.id === id);

/**
 * The fetch an adapter's outbound calls use: the operator's channel API bases
 * (TELEGRAM_API_BASE, SLACK_API_BASE) are trusted as configured; a URL the
 * tenant chose (the webhook callback) goes through the provider address
 * policy unless PROVIDER_ALLOW_PRIVATE_URLS is on.
 */
export function fetchForChannel(adapter: ChannelAdapter, config: Config): typeof fetch {
  return adapter.id === 'webhook' && !config.providers.allowPrivateUrls ? guardedFetch : fetch;
}
