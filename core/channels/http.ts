// Outbound HTTP for channel adapters: JSON in and out, a timeout, and a
// network failure reported as retryable. Only the status and the parsed body
// come back; URLs (a Telegram bot token is part of its path) never reach logs.
import { hostOf } from '../providers/outbound.ts';
import { storableJson } from '../storable.ts';
import { ChannelSendError } from './types.ts';

export type JsonReply = { status: number; retryAfterS: number | null; body: Record<string, unknown> };

/** One request's bound: a channel that does not answer in time is retried later, its slot given back meanwhile. */
const TIMEOUT_MS = 10_000;

export function retryAfterOf(header: string | null): number | null {
  if (!header) return null;
  const seconds = Number(header);
  if (Number.isFinite(seconds) && seconds >= 0) return Math.ceil(seconds);
  const at = Date.parse(header);
  return Number.isNaN(at) ? null : Math.max(0, Math.ceil((at - Date.now()) / 1000));
}

export async function callJson(
  fetchFn: typeof fetch,
  url: string,
  init: { method?: string; headers?: Record<string, string>; body?: string },
): Promise<JsonReply> {
  let response: Response;
  try {
    response = await fetchFn(url, {
      method: init.method ?? 'POST',
      headers: init.headers,
      body: init.body,
      signal: AbortSignal.timeout(TIMEOUT_MS),
    });
  } catch (error) {
    const cause = (error as Error).cause as (Error & { code?: string }) | undefined;
    if (cause?.name === 'OutboundBlockedError')
      throw new ChannelSendError('permanent', `the address is refused: ${cause.message}`);
    // The host and the network's error code say why; the path (a bot token may be in it) never.
    const why =
      (error as Error).name === 'TimeoutError'
        ? `no answer in ${TIMEOUT_MS / 1000} s`
        : (cause?.code ?? cause?.name ?? (error as Error).name);
    throw new ChannelSendError('retry', `${hostOf(url, 'the channel')} could not be reached (${why})`);
  }
  const text = await response.text().catch(() => '');
  let body: Record<string, unknown> = {};
  try {
    // Made storable: its values (a message id, an error's description, an account's name) reach text and jsonb columns.
    const parsed: unknown = text ? storableJson(JSON.parse(text)) : {};
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) body = parsed as Record<string, unknown>;
  } catch {
    body = {};
  }
  return { status: response.status, retryAfterS: retryAfterOf(response.headers.get('retry-after')), body };
}

/** 429 and 5xx are worth retrying; the caller decides about other statuses. */
export function throwIfTransient(reply: JsonReply, what: string): void {
  if (reply.status === 429) throw new ChannelSendError('retry', `${what}: rate limited`, reply.retryAfterS ?? 1);
  if (reply.status >= 500)
    throw new ChannelSendError('retry', `${what}: the channel answered ${reply.status}`, reply.retryAfterS);
}
