// Adapter for the OpenAI chat-completions protocol, which OpenRouter and
// Ollama (/v1) speak too. Streams with the official SDK; the SDK's retries
// are off because our job queue retries a failed turn as a whole.
import OpenAI, { APIConnectionError, APIConnectionTimeoutError, APIError } from 'openai';
import {
  DEFAULT_TIMEOUT_MS,
  Deadline,
  DeltaHandlerError,
  emitDelta,
  estimateInputTokens,
  estimateTokens,
  fallbackError,
  httpProviderError,
  kindForStreamError,
} from './errors.ts';
import { sdkEndpoint } from './outbound.ts';
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

  async function complete(request: CompletionRequest, credentials: Credentials): Promise<CompletionResult> {
    const openai = client(credentials);
    const deadline = new Deadline(timeoutMs, request.signal);
    let text = '';
    let finishReason: string | null = null;
    let usage: { prompt_tokens: number; completion_tokens: number } | null = null;
    let started = false;
    try {
      const limit = request.maxOutputTokens;
      const stream = await openai.chat.completions.create(
        {
          model: request.model,
          messages: request.messages.map((m) => ({ role: m.role, content: m.content })),
          stream: true,
          stream_options: { include_usage: true },
          // OpenAI deprecated max_tokens; the compatible servers still expect it.
          ...(limit === undefined ? {} : options.id === 'openai' ? { max_completion_tokens: limit } : { max_tokens: limit }),
        },
        { signal: deadline.signal },
      );
      started = true;
      deadline.touch();
      for await (const chunk of stream) {
        deadline.touch();
        if (chunk.usage) usage = chunk.usage;
        const choice = chunk.choices?.[0];
        if (!choice) continue;
        const delta = choice.delta?.content ?? '';
        if (delta) {
          text += delta;
          await emitDelta(request.onDelta, delta);
        }
        if (choice.finish_reason) finishReason = choice.finish_reason;
      }
      // The SDK ends the loop quietly when our signal aborts it.
      const aborted = deadline.abortError();
      if (aborted) throw aborted;
    } catch (error) {
      // After the finish reason the answer is whole; a cut before the usage
      // chunk only costs us exact token counts.
      if (error instanceof DeltaHandlerError || finishReason === null || deadline.callerAborted) {
        throw mapError(error, deadline, started);
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
