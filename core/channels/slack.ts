// Slack: an app's client id, client secret and signing secret. Linking hands
// out the OAuth v2 install URL; Slack redirects the person to our callback
// with a code, which the link job exchanges (oauth.v2.access) for the bot
// token. Events API requests are signed (X-Slack-Signature v0, 5 minutes).
import { createHmac } from 'node:crypto';
import { z } from 'zod';
import { callJson, throwIfTransient } from './http.ts';
import { verifyTimestampedSignature } from './signatures.ts';
import { ChannelSendError, type AdapterContext, type ChannelAdapter } from './types.ts';

export const SLACK_SCOPES = 'app_mentions:read,chat:write,im:history';
// Answers that no retry can change: the token or the conversation is gone.
const PERMANENT = new Set([
  'invalid_auth',
  'token_revoked',
  'account_inactive',
  'not_authed',
  'channel_not_found',
  'not_in_channel',
  'is_archived',
  'missing_scope',
  'team_access_not_granted',
]);

export const slackRedirectUri = (baseUrl: string) => `${baseUrl}/api/channels/slack/oauth/callback`;

export function slackSignature(secret: string, timestamp: string, raw: Buffer | string): string {
  return `v0=${createHmac('sha256', secret).update(`v0:${timestamp}:`).update(raw).digest('hex')}`;
}

async function web(
  ctx: AdapterContext,
  method: string,
  body: Record<string, unknown>,
  token: string | undefined,
  form = false,
) {
  const headers: Record<string, string> = form
    ? { 'content-type': 'application/x-www-form-urlencoded' }
    : { 'content-type': 'application/json; charset=utf-8' };
  if (token) headers.authorization = `Bearer ${token}`;
  const payload = form ? new URLSearchParams(body as Record<string, string>).toString() : JSON.stringify(body);
  const reply = await callJson(ctx.fetch, `${ctx.config.channels.slackApiBase}/${method}`, { headers, body: payload });
  throwIfTransient(reply, method);
  if (reply.body.ok !== true) {
    const error = String(reply.body.error ?? `HTTP ${reply.status}`);
    if (error === 'ratelimited') throw new ChannelSendError('retry', `${method}: ${error}`, reply.retryAfterS ?? 1);
    throw new ChannelSendError(
      PERMANENT.has(error) || reply.status < 500 ? 'permanent' : 'retry',
      `${method}: ${error}`,
    );
  }
  return reply.body;
}

const Envelope = z
  .object({
    type: z.string(),
    challenge: z.string().optional(),
    event_id: z.string().optional(),
    team_id: z.string().optional(),
    event: z
      .object({
        type: z.string(),
        text: z.string().optional(),
        channel: z.string().optional(),
        user: z.string().optional(),
        bot_id: z.string().optional(),
        subtype: z.string().optional(),
      })
      .loose()
      .optional(),
  })
  .loose();

export const slack: ChannelAdapter = {
  id: 'slack',
  title: 'Slack',
  linkKind: 'url',
  configSchema: z.object({
    clientId: z
      .string()
      .regex(/^[\w.-]{3,100}$/, "the Slack app's client id")
      .optional(),
    clientSecret: z.string().min(8).max(200).optional(),
    signingSecret: z.string().min(8).max(200).optional(),
  }),
  secretFields: ['clientSecret', 'signingSecret'],
  requiredForLink: ['clientId', 'clientSecret', 'signingSecret'],
  linkTarget(config, settings, code) {
    const url = new URL(config.channels.slackAuthorizeUrl);
    url.searchParams.set('client_id', settings.config.clientId!);
    url.searchParams.set('scope', SLACK_SCOPES);
    url.searchParams.set('redirect_uri', slackRedirectUri(config.baseUrl));
    url.searchParams.set('state', code);
    return { linkUrl: url.toString() };
  },
  // Nothing to register by API: the Events URL is set in the app's settings (Slack verifies it with a challenge).
  async register() {
    return {};
  },
  async finishLink(ctx) {
    const body = await web(
      ctx,
      'oauth.v2.access',
      {
        client_id: ctx.settings.config.clientId!,
        client_secret: ctx.settings.secrets.clientSecret!,
        code: ctx.settings.secrets.oauthCode!,
        redirect_uri: slackRedirectUri(ctx.config.baseUrl),
      },
      undefined,
      true,
    );
    const team = body.team as { id?: string; name?: string } | undefined;
    const token = body.access_token;
    if (typeof token !== 'string' || !team?.id)
      throw new ChannelSendError('permanent', 'oauth.v2.access: no bot token or team in the answer');
    return {
      secrets: { botToken: token },
      account: { teamId: team.id, teamName: team.name ?? null, botUserId: body.bot_user_id ?? null },
      boundRef: team.id,
    };
  },
  verify(settings, request) {
    return verifyTimestampedSignature(
      settings.secrets.signingSecret,
      request,
      { timestamp: 'x-slack-request-timestamp', signature: 'x-slack-signature' },
      slackSignature,
    );
  },
  parse(body) {
    const envelope = Envelope.safeParse(body);
    if (!envelope.success) return null;
    const e = envelope.data;
    if (e.type === 'url_verification' && e.challenge) return { kind: 'challenge', body: { challenge: e.challenge } };
    if (e.type !== 'event_callback' || !e.event_id) return null;
    const event = e.event;
    // Our own bot's messages (and edits, joins) are not turns.
    const isMessage =
      !!event && (event.type === 'message' || event.type === 'app_mention') && !event.bot_id && !event.subtype;
    return {
      kind: 'update',
      externalId: e.event_id,
      chatRef: isMessage ? (event.channel ?? null) : null,
      boundRef: e.team_id ?? null,
      text: isMessage ? (event.text ?? null) : null,
      linkCode: null,
      account: null,
      payload: body,
    };
  },
  async send(ctx, to, text) {
    const body = await web(
      ctx,
      'chat.postMessage',
      { channel: to, text: text.slice(0, 40_000) },
      ctx.settings.secrets.botToken,
    );
    return { messageId: typeof body.ts === 'string' ? body.ts : null };
  },
  async unregister(ctx) {
    if (!ctx.settings.secrets.botToken) return;
    try {
      await web(ctx, 'auth.revoke', {}, ctx.settings.secrets.botToken, true);
    } catch (error) {
      if (error instanceof ChannelSendError && error.kind === 'permanent') return; // already revoked
      throw error;
    }
  },
};
