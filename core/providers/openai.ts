// Adapter for the OpenAI chat-completions protocol, which OpenRouter and
// Ollama (/v1) speak too. Streams through stream-request.ts; checks keys with
// the official SDK. Nothing here retries: our job queue retries a failed
// turn as a whole.
import OpenAI, { APIConnectionError, APIConnectionTimeoutError, APIError } from 'openai';
import {
  DEFAULT_TIMEOUT_MS,
  Deadline,
  DeltaHandlerError,
  deliverDelta,
  estimateInputTokens,
  estimateTokens,
  fallbackError,
  httpProviderError,
  kindForStreamError,
} from './errors.ts';
import { dispatcherFor, sdkEndpoint } from './outbound.ts';
import { postEventStream, StreamHttpError, type StreamFailure } from './stream-request.ts';
import {
  ProviderError,
  type CompletionRequest,
  type CompletionResult,
  type Credentials,
  type ModelInfo,
  type ProviderAdapter,
} from './types.ts';

export type OpenAICompatibleOptions = {
  id: 'openai' | 'openrouter' | 'ollama';
  displayName: string;
  /** Used when the credentials carry no baseUrl, e.g. https://api.openai.com/v1. */
  defaultBaseUrl: string;
  needsKey: boolean;
  models: readonly ModelInfo[];
  /** How long to wait for the response, and for each next piece of a stream. */
  timeoutMs?: number;
  /** Lets a credential's own baseUrl lead to private addresses (PROVIDER_ALLOW_PRIVATE_URLS). */
  allowPrivateUrls?: boolean;
};

// The SDK insists on a key; servers that need none (Ollama) ignore this one.
const NO_KEY = 'not-needed';

/** The parts of a chat.completion.chunk event we read. */
type StreamChunk = {
  choices?: Array<{ delta?: { content?: string | null }; finish_reason?: string | null }>;
  usage?: { prompt_tokens: number; completion_tokens: number } | null;
  error?: { message?: string; type?: string; code?: string | null } | string;
};

export function createOpenAICompatibleAdapter(options: OpenAICompatibleOptions): ProviderAdapter {
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;

  function client(credentials: Credentials): OpenAI {
    if (options.needsKey && !credentials.apiKey) {
      throw new ProviderError('invalid_key', `no API key for ${options.displayName}`);
    }
    // apiKey and baseURL are always explicit so OPENAI_API_KEY / OPENAI_BASE_URL
    // in the environment never leak into a tenant's call.
    return new OpenAI({
      apiKey: credentials.apiKey ?? NO_KEY,
      // A tenant's own endpoint goes through the outbound policy (outbound.ts).
      ...sdkEndpoint(credentials.baseUrl, options),
      maxRetries: 0,
      timeout: timeoutMs,
      logLevel: 'off',
    });
  }

  /** Maps whatever the SDK threw; `started` says whether the stream had begun. */
  function mapError(error: unknown, deadline: Deadline, started: boolean): unknown {
    const aborted = deadline.abortError();
    if (aborted && !(error instanceof ProviderError)) return fallbackError(error, deadline, started);
    if (error instanceof APIConnectionTimeoutError) {
      return new ProviderError('timeout', `${options.displayName} did not answer within ${timeoutMs} ms`);
    }
    if (error instanceof APIConnectionError) return fallbackError(error, deadline, started);
    if (error instanceof APIError) {
      if (error.status) return httpProviderError(error.status, error.message, error.headers, error.code ?? error.type);
      // An error event inside the stream: no status, only the body's type/code.
      return new ProviderError(kindForStreamError(error.code ?? error.type), `${options.displayName}: ${error.message}`);
    }
    return fallbackError(error, deadline, started);
  }

  /** An error answer's body: OpenAI's {error: {message, type, code}}, or whatever text came. */
  function httpFailure(failure: StreamFailure): ProviderError {
    let message = failure.body.slice(0, 500) || `HTTP ${failure.status}`;
    let hint: string | null = null;
    try {
      const parsed = JSON.parse(failure.body) as { error?: { message?: string; type?: string; code?: string | null } | string; message?: string };
      const e = typeof parsed.error === 'object' ? parsed.error : undefined;
      message = e?.message ?? (typeof parsed.error === 'string' ? parsed.error : undefined) ?? parsed.message ?? message;
      hint = e?.code ?? e?.type ?? null;
    } catch {
      // not JSON: the text is the message
    }
    return httpProviderError(failure.status, `${failure.status} ${message}`, failure.headers, hint);
  }

  // Streams go through stream-request.ts (undici, a plain SSE parser), not the
  // SDK: a worker holds a thousand at once, and the SDK's path cost 2.5 times
  // the CPU per event. The SDK still checks keys (validateKey).
  async function complete(request: CompletionRequest, credentials: Credentials): Promise<CompletionResult> {
    if (options.needsKey && !credentials.apiKey) throw new ProviderError('invalid_key', `no API key for ${options.displayName}`);
    const { baseURL } = sdkEndpoint(credentials.baseUrl, options);
    const dispatcher = dispatcherFor(baseURL, { trustedBaseUrl: options.defaultBaseUrl, allowPrivateUrls: options.allowPrivateUrls ?? false });
    const deadline = new Deadline(timeoutMs, request.signal);
    let text = '';
    // Set inside the event handler (a closure): typed wide so the checks below see it.
    let finishReason = null as string | null;
    let usage = null as { prompt_tokens: number; completion_tokens: number } | null;
    let started = false;
    const limit = request.maxOutputTokens;
    const body = JSON.stringify({
      model: request.model,
      messages: request.messages.map((m) => ({ role: m.role, content: m.content })),
      stream: true,
      stream_options: { include_usage: true },
      // OpenAI deprecated max_tokens; the compatible servers still expect it.
      ...(limit === undefined ? {} : options.id === 'openai' ? { max_completion_tokens: limit } : { max_tokens: limit }),
    });
    try {
      await postEventStream(
        `${baseURL.replace(/\/+$/, '')}/chat/completions`,
        { headers: { authorization: `Bearer ${credentials.apiKey ?? NO_KEY}` }, body, signal: deadline.signal, dispatcher },
        (event) => {
          started = true;
          deadline.touch();
          if (event.data === '[DONE]') return;
          const chunk = JSON.parse(event.data) as StreamChunk;
          if (chunk.error) {
            const e = typeof chunk.error === 'object' ? chunk.error : { message: String(chunk.error) };
            throw new ProviderError(kindForStreamError(e.code ?? e.type), `${options.displayName}: ${e.message ?? 'error in the stream'}`);
          }
          if (chunk.usage) usage = chunk.usage;
          const choice = chunk.choices?.[0];
          if (!choice) return;
          if (choice.finish_reason) finishReason = choice.finish_reason;
          const delta = choice.delta?.content;
          if (!delta) return;
          text += delta;
          // Awaited only when the caller's handler returns a promise.
          return deliverDelta(request.onDelta, delta);
        },
      );
      const aborted = deadline.abortError();
      if (aborted) throw aborted;
    } catch (error) {
      // After the finish reason the answer is whole; a cut before the usage
      // chunk only costs us exact token counts.
      if (error instanceof DeltaHandlerError || finishReason === null || deadline.callerAborted) {
        throw error instanceof StreamHttpError ? httpFailure(error.failure) : fallbackError(error, deadline, started);
      }
    } finally {
      deadline.dispose();
    }
    if (finishReason === null) {
      throw new ProviderError('interrupted', `${options.displayName} ended the stream without a finish reason`);
    }
    return {
      text,
      inputTokens: usage?.prompt_tokens ?? estimateInputTokens(request.messages),
      outputTokens: usage?.completion_tokens ?? estimateTokens(text),
      finishReason,
    };
  }

  async function validateKey(credentials: Credentials, signal?: AbortSignal): Promise<{ valid: true } | { valid: false; reason: string }> {
    if (options.needsKey && !credentials.apiKey) return { valid: false, reason: 'no API key given' };
    const openai = client(credentials);
    const deadline = new Deadline(timeoutMs, signal);
    try {
      // OpenRouter lists models without a key, so ask about the key itself there.
      if (options.id === 'openrouter') await openai.get('/key', { signal: deadline.signal });
      else await openai.models.list({ signal: deadline.signal });
      return { valid: true };
    } catch (error) {
      const mapped = mapError(error, deadline, false);
      if (mapped instanceof ProviderError && mapped.kind === 'invalid_key') {
        return { valid: false, reason: `${options.displayName} refused the key (${mapped.status ?? 'no status'})` };
      }
      throw mapped;
    } finally {
      deadline.dispose();
    }
  }

  return {
    id: options.id,
    displayName: options.displayName,
    needsKey: options.needsKey,
    models: options.models,
    complete,
    validateKey,
  };
}
