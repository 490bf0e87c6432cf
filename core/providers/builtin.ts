// The built-in offline model (builtin/offline): deterministic, no network,
// free. It lets a new workspace chat at once, before anyone adds a key, and
// gives tests a provider that needs no server.
import { estimateInputTokens, estimateTokens } from './errors.ts';
import type { ChatMessage, CompletionRequest, CompletionResult, ModelInfo, ProviderAdapter } from './types.ts';

export const BUILTIN_MODELS: readonly ModelInfo[] = [
  { id: 'offline', name: 'Offline (built-in)', contextWindow: 8_192, inputPricePerMTokMicros: 0, outputPricePerMTokMicros: 0 },
];

const QUOTE_LIMIT = 160;

function quote(text: string): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length <= QUOTE_LIMIT ? flat : `${flat.slice(0, QUOTE_LIMIT - 1).trimEnd()}…`;
}

/** The whole answer for a conversation; the same input always gives the same text. */
export function offlineReply(messages: readonly ChatMessage[]): string {
  const lastUser = [...messages].reverse().find((m) => m.role === 'user');
  if (!lastUser || lastUser.content.trim() === '') {
    return 'Hello! I am the built-in offline model. Send me a message and I will echo it back.';
  }
  const words = lastUser.content.trim().split(/\s+/).length;
  const turns = messages.filter((m) => m.role === 'user').length;
  return (
    `You said: "${quote(lastUser.content)}" (${words} ${words === 1 ? 'word' : 'words'}, message ${turns} of this conversation). ` +
    'I am the built-in offline model, so I can only echo; add a provider key to talk to a real model.'
  );
}

/** Splits text into about `parts` pieces at word boundaries, so deltas look like a stream. */
export function splitForStreaming(text: string, parts: number): string[] {
  const words = text.match(/\S+\s*/g) ?? [];
  if (words.length === 0) return text ? [text] : [];
  const n = Math.max(1, Math.min(parts, words.length));
  return Array.from({ length: n }, (_, i) => words.slice(Math.floor((i * words.length) / n), Math.floor(((i + 1) * words.length) / n)).join(''));
}

function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException('The operation was aborted', 'AbortError');
}

async function complete(request: CompletionRequest): Promise<CompletionResult> {
  let reply = offlineReply(request.messages);
  let finishReason = 'stop';
  // Honour an output limit like a real model would: cut and say so.
  const limit = request.maxOutputTokens;
  if (limit !== undefined && estimateTokens(reply) > limit) {
    reply = reply.slice(0, Math.max(0, limit * 4));
    finishReason = 'length';
  }
  let text = '';
  for (const piece of splitForStreaming(reply, 5)) {
    if (request.signal?.aborted) throw abortReason(request.signal);
    // Yield to the event loop between pieces, as a network stream would.
    await new Promise<void>((resolve) => setImmediate(resolve));
    text += piece;
    await request.onDelta?.(piece);
  }
  return { text, inputTokens: estimateInputTokens(request.messages), outputTokens: estimateTokens(text), finishReason };
}

export const builtinAdapter: ProviderAdapter = {
  id: 'builtin',
  displayName: 'Built-in (offline)',
  needsKey: false,
  models: BUILTIN_MODELS,
  complete,
  async validateKey() {
    return { valid: true };
  },
};
