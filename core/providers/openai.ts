// The OpenAI chat-completions protocol, which OpenRouter and Ollama (/v1)
// speak too, as a protocol for the shared adapter (adapter.ts).
import { createHttpAdapter, type AdapterOptions, type ProviderProtocol, type StreamReader } from './adapter.ts';
import { streamEventError } from './errors.ts';
import type { ProviderAdapter } from './types.ts';

export type OpenAICompatibleOptions = AdapterOptions & {
  id: 'openai' | 'openrouter' | 'ollama';
  /** e.g. https://api.openai.com/v1: the paths come after the /v1. */
  defaultBaseUrl: string;
  needsKey: boolean;
};

// Sent when there is no key: keyless servers (Ollama) ignore the value, and
// every compatible server still gets the Authorization header it expects.
const NO_KEY = 'not-needed';

type ErrorObject = { message?: string; type?: string; code?: string | null };
/** The parts of a chat.completion.chunk event we read. */
type StreamChunk = {
  choices?: Array<{ delta?: { content?: string | null }; finish_reason?: string | null }>;
  usage?: { prompt_tokens: number; completion_tokens: number } | null;
  error?: ErrorObject | string;
};

function chunkReader(displayName: string): StreamReader {
  let finishReason: string | null = null;
  let usage: StreamChunk['usage'] = null;
  return {
    read(event) {
      if (event.data === '[DONE]') return;
      const chunk = JSON.parse(event.data) as StreamChunk;
      if (chunk.error) {
        const e = typeof chunk.error === 'object' ? chunk.error : { message: String(chunk.error) };
        throw streamEventError(displayName, e.code ?? e.type, e.message);
      }
      if (chunk.usage) usage = chunk.usage;
      const choice = chunk.choices?.[0];
      if (!choice) return;
      if (choice.finish_reason) finishReason = choice.finish_reason;
      return choice.delta?.content ?? undefined;
    },
    finishReason: () => finishReason,
    usage: () => ({ input: usage?.prompt_tokens ?? null, output: usage?.completion_tokens ?? null }),
    incomplete: () => 'without a finish reason',
  };
}

function chatCompletionsProtocol(id: OpenAICompatibleOptions['id'], needsKey: boolean): ProviderProtocol {
  return {
    id,
    needsKey,
    completionPath: '/chat/completions',
    // OpenRouter lists models without a key, so ask about the key itself there.
    keyCheckPath: id === 'openrouter' ? '/key' : '/models',
    headers: (apiKey) => ({ authorization: `Bearer ${apiKey ?? NO_KEY}` }),
    body(request) {
      const limit = request.maxOutputTokens;
      return {
        model: request.model,
        messages: request.messages.map((m) => ({ role: m.role, content: m.content })),
        stream: true,
        stream_options: { include_usage: true },
        // OpenAI deprecated max_tokens; the compatible servers still expect it.
        ...(limit === undefined ? {} : id === 'openai' ? { max_completion_tokens: limit } : { max_tokens: limit }),
      };
    },
    reader: chunkReader,
    /** OpenAI's {error: {message, type, code}}; some compatible servers send {error: "text"} or {message}. */
    errorBody(parsed) {
      const body = parsed as { error?: ErrorObject | string; message?: string };
      const e = typeof body.error === 'object' ? body.error : undefined;
      return {
        message: e?.message ?? (typeof body.error === 'string' ? body.error : undefined) ?? body.message,
        hint: e?.code ?? e?.type,
      };
    },
  };
}

export function createOpenAICompatibleAdapter(options: OpenAICompatibleOptions): ProviderAdapter {
  return createHttpAdapter(chatCompletionsProtocol(options.id, options.needsKey), options);
}
