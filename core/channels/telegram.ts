// Telegram Bot API: a bot token (from @BotFather) and the bot's username.
// Linking hands out https://t.me/<bot>?start=<code>; the person's
// "/start <code>" binds the chat. Inbound updates carry the secret token set
// with setWebhook in X-Telegram-Bot-Api-Secret-Token.
import { z } from 'zod';
import { constantTimeEqual } from '../crypto/tokens.ts';
import { callJson, throwIfTransient, type JsonReply } from './http.ts';
import { ChannelSendError, type AdapterContext, type ChannelAdapter } from './types.ts';

const api = (ctx: AdapterContext, method: string) =>
  `${ctx.config.channels.telegramApiBase}/bot${ctx.settings.secrets.botToken}/${method}`;

async function call(ctx: AdapterContext, method: string, body: Record<string, unknown>): Promise<JsonReply> {
  return callJson(ctx.fetch, api(ctx, method), {
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
}

/** Telegram's refusal: {ok:false, error_code, description, parameters:{retry_after}}. */
function refusal(reply: JsonReply, what: string): ChannelSendError | null {
  if (reply.body.ok === true && reply.status < 300) return null;
  const retryAfter = (reply.body.parameters as { retry_after?: number } | undefined)?.retry_after;
  const code = Number(reply.body.error_code ?? reply.status);
  const description = String(reply.body.description ?? `HTTP ${reply.status}`);
  if (code === 429)
    return new ChannelSendError('retry', `${what}: ${description}`, retryAfter ?? reply.retryAfterS ?? 1);
  if (code >= 500 || reply.status >= 500)
    return new ChannelSendError('retry', `${what}: ${description}`, reply.retryAfterS);
  // 401 (token revoked), 403 (bot blocked, kicked), 400 (chat not found): retrying cannot help.
  return new ChannelSendError('permanent', `${what}: ${description}`);
}

const START = /^\/start(?:@\w+)?\s+([A-Za-z0-9_-]{16,64})\s*$/;

const Update = z
  .object({
    update_id: z.number().int(),
    message: z
      .object({
        text: z.string().optional(),
        chat: z.object({
          id: z.number().int(),
          type: z.string().optional(),
          username: z.string().optional(),
          first_name: z.string().optional(),
        }),
        from: z
          .object({
            id: z.number().int(),
            username: z.string().optional(),
            first_name: z.string().optional(),
            is_bot: z.boolean().optional(),
          })
          .optional(),
      })
      .optional(),
  })
  .loose();

export const telegram: ChannelAdapter = {
  id: 'telegram',
  title: 'Telegram',
  linkKind: 'url',
  configSchema: z.object({
    botToken: z
      .string()
      .regex(/^\d{3,20}:[A-Za-z0-9_-]{20,100}$/, 'a bot token from @BotFather (123456:ABC...)')
      .optional(),
    botUsername: z
      .string()
      .regex(/^[A-Za-z][A-Za-z0-9_]{3,31}$/, "the bot's username, without @")
      .optional(),
  }),
  secretFields: ['botToken'],
  requiredForLink: ['botToken', 'botUsername'],
  linkTarget: (_config, settings, code) => ({ linkUrl: `https://t.me/${settings.config.botUsername}?start=${code}` }),
  async register(ctx, inboundUrl) {
    const me = await call(ctx, 'getMe', {});
    const meRefused = refusal(me, 'getMe');
    if (meRefused) throw meRefused;
    const bot = me.body.result as { id?: number; username?: string } | undefined;
    if (bot?.username?.toLowerCase() !== ctx.settings.config.botUsername?.toLowerCase()) {
      throw new ChannelSendError(
        'permanent',
        `the bot token belongs to @${bot?.username ?? '?'}, not @${ctx.settings.config.botUsername}`,
      );
    }
    const hook = await call(ctx, 'setWebhook', {
      url: inboundUrl,
      secret_token: ctx.settings.secrets.webhookSecret,
      allowed_updates: ['message'],
      drop_pending_updates: true,
    });
    const hookRefused = refusal(hook, 'setWebhook');
    if (hookRefused) throw hookRefused;
    return { account: { botId: bot?.id ?? null, botUsername: bot?.username ?? null } };
  },
  verify(settings, request) {
    const given = request.headers['x-telegram-bot-api-secret-token'];
    const expected = settings.secrets.webhookSecret;
    if (typeof given !== 'string' || !expected) return false;
    return constantTimeEqual(given, expected);
  },
  parse(body) {
    const update = Update.safeParse(body);
    if (!update.success) return null;
    const message = update.data.message;
    const text = message?.text ?? null;
    const chatId = message ? String(message.chat.id) : null;
    return {
      kind: 'update',
      externalId: String(update.data.update_id),
      chatRef: chatId,
      boundRef: chatId,
      text,
      linkCode: text ? (START.exec(text)?.[1] ?? null) : null,
      account: message
        ? {
            chatId,
            username: message.from?.username ?? message.chat.username ?? null,
            firstName: message.from?.first_name ?? null,
          }
        : null,
      payload: body,
    };
  },
  async send(ctx, to, text) {
    const reply = await call(ctx, 'sendMessage', { chat_id: to, text: text.slice(0, 4096) });
    const refused = refusal(reply, 'sendMessage');
    if (refused) throw refused;
    return { messageId: String((reply.body.result as { message_id?: number } | undefined)?.message_id ?? '') || null };
  },
  async unregister(ctx) {
    const reply = await call(ctx, 'deleteWebhook', {});
    throwIfTransient(reply, 'deleteWebhook'); // a revoked token has no webhook left to delete
  },
};
