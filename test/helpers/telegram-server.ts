// A local Telegram Bot API (the methods the telegram channel uses: getMe,
// setWebhook, deleteWebhook, sendMessage), and a way to send updates to the
// registered webhook the way Telegram does (with the secret token header).
import type { Test } from 'tap';
import { startFakeServer, type Scripted } from './channel-servers.ts';

export type TelegramSent = { chatId: string; text: string };

export async function startTelegramServer(
  t: Test,
  bot = { token: '123456:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA', username: 'test_helper_bot', id: 123456 },
) {
  const state = {
    webhook: null as null | { url: string; secret: string },
    sent: [] as TelegramSent[],
    calls: [] as string[],
    /** Answers for the next sendMessage calls, in order (then: success). */
    sendScript: [] as Scripted[],
    /** When set, the next setWebhook answers only once this settles (a link step caught mid-way). */
    setWebhookHold: null as Promise<void> | null,
    revoked: false,
    nextMessageId: 1,
    nextUpdateId: 1000,
  };
  const ok = (result: unknown) => ({ body: { ok: true, result } });
  const { url } = await startFakeServer(t, async (req) => {
    const match = /^\/bot([^/]+)\/(\w+)$/.exec(req.path);
    if (!match) return { status: 404, body: { ok: false, error_code: 404, description: 'Not Found' } };
    const [, token, method] = match;
    state.calls.push(method!);
    if (token !== bot.token || state.revoked)
      return { status: 401, body: { ok: false, error_code: 401, description: 'Unauthorized' } };
    const body = (req.raw ? JSON.parse(req.raw) : {}) as Record<string, unknown>;
    switch (method) {
      case 'getMe':
        return ok({ id: bot.id, is_bot: true, first_name: 'Test', username: bot.username });
      case 'setWebhook': {
        state.webhook = { url: String(body.url), secret: String(body.secret_token) };
        const hold = state.setWebhookHold ?? undefined;
        state.setWebhookHold = null;
        return { ...ok(true), ...(hold ? { hold } : {}) };
      }
      case 'deleteWebhook':
        state.webhook = null;
        return ok(true);
      case 'sendMessage': {
        const scripted = state.sendScript.shift();
        if (scripted) return scripted;
        const sent = { chatId: String(body.chat_id), text: String(body.text) };
        const id = state.nextMessageId++;
        return {
          ...ok({ message_id: id, chat: { id: Number(body.chat_id) }, text: body.text }),
          onDelivered: () => state.sent.push(sent),
        };
      }
      default:
        return { status: 404, body: { ok: false, error_code: 404, description: 'Not Found: method not found' } };
    }
  });

  /** Sends an update to the registered webhook, signed like Telegram (or not, or wrongly). */
  async function deliver(update: Record<string, unknown>, secret: string | null = state.webhook?.secret ?? null) {
    if (!state.webhook) throw new Error('no webhook registered');
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    if (secret !== null) headers['x-telegram-bot-api-secret-token'] = secret;
    return fetch(state.webhook.url, { method: 'POST', headers, body: JSON.stringify(update) });
  }
  const message = (chatId: number, text: string, updateId = state.nextUpdateId++) => ({
    update_id: updateId,
    message: {
      message_id: updateId,
      date: Math.floor(Date.now() / 1000),
      text,
      chat: { id: chatId, type: 'private', username: 'alice' },
      from: { id: chatId, is_bot: false, first_name: 'Alice', username: 'alice' },
    },
  });
  return { url, bot, state, deliver, message };
}
