// Messaging channels: where their APIs are, and how long a started link lasts.
import { group, setting } from '../declare.ts';
import { intFromEnv, urlFromEnv } from '../parsers.ts';

export const channels = group('Messaging channels', 'See [Messaging channels](channels.md).', {
  TELEGRAM_API_BASE: setting(urlFromEnv, {
    default: 'https://api.telegram.org',
    doc: 'Telegram Bot API (a self-hosted Bot API server or a test server)',
  }),
  SLACK_API_BASE: setting(urlFromEnv, { default: 'https://slack.com/api', doc: 'Slack Web API' }),
  SLACK_AUTHORIZE_URL: setting(urlFromEnv, {
    default: 'https://slack.com/oauth/v2/authorize',
    doc: "Slack's OAuth v2 install page",
  }),
  CHANNEL_LINK_TTL_S: setting(intFromEnv(60, 86_400), {
    default: 900,
    doc: 'How long a started link (deep link, install URL, session token) stays usable',
  }),
});
