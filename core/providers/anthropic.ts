// Anthropic's Messages API as a protocol for the shared adapter (adapter.ts).
// System messages travel in `system`; usage comes from message_start and
// message_delta.
import { createHttpAdapter, type AdapterOptions, type ProviderProtocol, type StreamReader } from './adapter.ts';
import { normalizeFinishReason, streamEventError } from './errors.ts';
import type { ChatMessage, ProviderAdapter } from './types.ts';

export type AnthropicOptions = Omit<AdapterOptions, 'displayName' | 'defaultBaseUrl'> & {
  displayName?: string;
  /** Without /v1, e.g. https://api.anthropic.com (the paths carry /v1). */
  defaultBaseUrl: string;
};

// The API requires max_tokens; this is the ceiling when the caller sets none.
const DEFAULT_MAX_TOKENS = 4096;
/** The API version the Messages protocol here is written against. */
const ANTHROPIC_VERSION = '2023-06-01';

type Usage = {
  input_tokens?: number | null;
  output_tokens?: number | null;
  cache_creation_input_tokens?: number | null;
  cache_read_input_tokens?: number | null;
};
/** The parts of a Messages stream event we read. */
type StreamEvent = {
  type: string;
  message?: { usage?: Usage };
  delta?: { type?: string; text?: string; stop_reason?: string | null };
  usage?: Usage;
  error?: { type?: string; message?: string };
};

type Turn = { role: 'user' | 'assistant'; content: string };

/** System messages joined into `system`; neighbours of the same role merged. */
export function toAnthropicMessages(messages: readonly ChatMessage[]): { system: string | undefined; turns: Turn[] } {
  const system = messages.filter((m) => m.role === 'system').map((m) => m.content);
  const turns: Turn[] = [];
  for (const m of messages) {
    if (m.role === 'system') continue;
    const last = turns.at(-1);
    if (last && last.role === m.role) last.content += `\n\n${m.content}`;
    else turns.push({ role: m.role, content: m.content });
  }
  return { system: system.length > 0 ? system.join('\n\n') : undefined, turns };
}

// Cached prompt tokens are input too; the price table has one input rate.
const promptTokens = (u: Usage) =>
  (u.input_tokens ?? 0) + (u.cache_creation_input_tokens ?? 0) + (u.cache_read_input_tokens ?? 0);

function messagesReader(displayName: string): StreamReader {
  let inputTokens: number | null = null;
  let outputTokens: number | null = null;
  let stopReason: string | null = null;
  let stopped = false;
  return {
    read(message) {
      const event = JSON.parse(message.data) as StreamEvent;
      switch (event.type) {
        case 'message_start': {
          // Anthropic-compatible servers do not all send usage.
          const u = event.message?.usage;
          if (u) {
            inputTokens = promptTokens(u);
            outputTokens = u.output_tokens ?? null;
          }
          return;
        }
        case 'content_block_delta':
          return event.delta?.type === 'text_delta' ? event.delta.text : undefined;
        case 'message_delta':
          // Counts here are cumulative, so they replace what message_start said.
          if (event.usage) {
            outputTokens = event.usage.output_tokens ?? outputTokens;
            if (event.usage.input_tokens != null) inputTokens = promptTokens(event.usage);
          }
          if (event.delta?.stop_reason) stopReason = event.delta.stop_reason;
          return;
        case 'message_stop':
          stopped = true;
          return;
        case 'error':
          // e.g. overloaded_error, after the answer had started.
          throw streamEventError(displayName, event.error?.type, event.error?.message);
      }
    },
    finishReason: () => (stopReason === null ? null : normalizeFinishReason(stopReason)),
    // An output count of 0 is taken as none reported: the estimate is 0 for an
    // empty answer anyway, and a non-empty one did not cost nothing.
    usage: () => ({ input: inputTokens, output: outputTokens || null }),
    incomplete: () => (stopped ? 'without a stop reason' : 'before message_stop'),
  };
}

const messagesProtocol: ProviderProtocol = {
  id: 'anthropic',
  needsKey: true,
  completionPath: '/v1/messages',
  keyCheckPath: '/v1/models?limit=1',
  headers: (apiKey) => ({
    ...(apiKey === undefined ? {} : { 'x-api-key': apiKey }),
    'anthropic-version': ANTHROPIC_VERSION,
  }),
  body(request) {
    const { system, turns } = toAnthropicMessages(request.messages);
    return {
      model: request.model,
      max_tokens: request.maxOutputTokens ?? DEFAULT_MAX_TOKENS,
      messages: turns,
      ...(system === undefined ? {} : { system }),
      stream: true,
    };
  },
  reader: messagesReader,
  /** {type: "error", error: {type, message}} */
  errorBody(parsed) {
    const { error } = parsed as { error?: { type?: string; message?: string } };
    return { message: error?.message, hint: error?.type };
  },
};

export function createAnthropicAdapter(options: AnthropicOptions): ProviderAdapter {
  return createHttpAdapter(messagesProtocol, { ...options, displayName: options.displayName ?? 'Anthropic' });
}
