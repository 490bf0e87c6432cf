// The generic HTTP channel. Linking hands out a session token; the tenant's
// system sends it once in an inbound message to bind its conversation.
// Inbound and outbound requests are signed alike:
//   X-Webhook-Timestamp: <unix seconds>
//   X-Webhook-Signature: v1=<hex HMAC-SHA256(signingSecret, "<timestamp>.<raw body>")>
// Replies are POSTed to the tenant's callback URL under the same outbound
// address policy as a tenant's provider base URL.
import { createHmac } from 'node:crypto';
import { z } from 'zod';
import { hostOf } from '../providers/outbound.ts';
import { callJson } from './http.ts';
import { verifyTimestampedSignature } from './signatures.ts';
import { ChannelSendError, type ChannelAdapter } from './types.ts';

export function webhookSignature(secret: string, timestamp: string, raw: Buffer | string): string {
  return `v1=${createHmac('sha256', secret).update(`${timestamp}.`).update(raw).digest('hex')}`;
}

/** Headers for a signed request (our replies; clients and tests sign inbound messages the same way). */
export function signWebhook(secret: string, raw: string, nowMs = Date.now()) {
  const timestamp = String(Math.floor(nowMs / 1000));
  return { 'x-webhook-timestamp': timestamp, 'x-webhook-signature': webhookSignature(secret, timestamp, raw) };
}

export const WebhookMessage = z.object({
  id: z.string().min(1).max(200).describe('Your id of this message: a message is stored once per id'),
  from: z.object({ id: z.string().min(1).max(200), name: z.string().max(200).optional() }),
  text: z.string().max(32_000).optional(),
  sessionToken: z
    .string()
    .max(200)
    .optional()
    .describe('The token from POST /api/channels/webhook/link, once, to bind this conversation'),
});

export const webhook: ChannelAdapter = {
  id: 'webhook',
  title: 'Webhook (HTTP)',
  linkKind: 'session_token',
  configSchema: z.object({
    callbackUrl: z
      .url({ protocol: /^https?$/ })
      .max(2048)
      .optional()
      .describe('Where replies are POSTed'),
    signingSecret: z.string().min(16).max(200).optional().describe('Shared secret of the HMAC signatures, both ways'),
  }),
  secretFields: ['signingSecret'],
  requiredForLink: ['callbackUrl', 'signingSecret'],
  linkTarget: (_config, _settings, code) => ({ sessionToken: code }),
  async register() {
    return {};
  },
  verify(settings, request) {
    return verifyTimestampedSignature(
      settings.secrets.signingSecret,
      request,
      { timestamp: 'x-webhook-timestamp', signature: 'x-webhook-signature' },
      webhookSignature,
    );
  },
  parse(body) {
    const message = WebhookMessage.safeParse(body);
    if (!message.success) return null;
    const m = message.data;
    return {
      kind: 'update',
      externalId: m.id,
      chatRef: m.from.id,
      boundRef: m.from.id,
      text: m.text ?? null,
      linkCode: m.sessionToken ?? null,
      account: { conversationId: m.from.id, name: m.from.name ?? null },
      payload: body,
    };
  },
  async send(ctx, to, text, key) {
    const raw = JSON.stringify({ id: key, to, text });
    const callback = ctx.settings.config.callbackUrl!;
    const reply = await callJson(ctx.fetch, callback, {
      headers: {
        'content-type': 'application/json',
        'idempotency-key': key,
        ...signWebhook(ctx.settings.secrets.signingSecret!, raw),
      },
      body: raw,
    });
    if (reply.status === 429)
      throw new ChannelSendError(
        'retry',
        `callback ${hostOf(callback, 'the channel')}: rate limited`,
        reply.retryAfterS ?? 1,
      );
    if (reply.status >= 500 || reply.status === 408)
      throw new ChannelSendError(
        'retry',
        `callback ${hostOf(callback, 'the channel')} answered ${reply.status}`,
        reply.retryAfterS,
      );
    if (reply.status >= 300)
      throw new ChannelSendError(
        'permanent',
        `callback ${hostOf(callback, 'the channel')} refused the reply (${reply.status})`,
      );
    return { messageId: typeof reply.body.id === 'string' ? reply.body.id : null };
  },
  async unregister() {},
};
