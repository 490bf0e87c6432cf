// Adapter for Anthropic's Messages API: streams through stream-request.ts,
// checks keys with the official SDK. System messages travel in `system`;
// usage comes from message_start and message_delta. Nothing here retries:
// our job queue does.
import Anthropic, { APIConnectionError, APIConnectionTimeoutError, APIError } from '@anthropic-ai/sdk';
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
  normalizeFinishReason,
} from './errors.ts';
import { dispatcherFor, sdkEndpoint } from './outbound.ts';
import { postEventStream, StreamHttpError, type StreamFailure } from './stream-request.ts';
import {
  ProviderError,
  type ChatMessage,
  type CompletionRequest,
  type CompletionResult,
  type Credentials,
  type ModelInfo,
  type ProviderAdapter,
} from './types.ts';

export type AnthropicOptions = {
  displayName?: string;
  /** Without /v1, e.g. https://api.anthropic.com (the SDK adds /v1/messages). */
  defaultBaseUrl: string;
  models: readonly ModelInfo[];
  timeoutMs?: number;
  /** Lets a credential's own baseUrl lead to private addresses (PROVIDER_ALLOW_PRIVATE_URLS). */
  allowPrivateUrls?: boolean;
};

// The API requires max_tokens; this is the ceiling when the caller sets none.
const DEFAULT_MAX_TOKENS = 4096;
/** The API version the Messages protocol here is written against (the SDK sends the same). */
const ANTHROPIC_VERSION = '2023-06-01';

type Usage = { input_tokens?: number | null; output_tokens?: number | null; cache_creation_input_tokens?: number | null; cache_read_input_tokens?: number | null };
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

export function createAnthropicAdapter(options: AnthropicOptions): ProviderAdapter {
  const displayName = options.displayName ?? 'Anthropic';
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;

  function client(credentials: Credentials): Anthropic {
    if (!credentials.apiKey) throw new ProviderError('invalid_key', `no API key for ${displayName}`);
    // Explicit key and URL: the SDK would otherwise read ANTHROPIC_* variables
    // and credential files of the machine.
    return new Anthropic({
      apiKey: credentials.apiKey,
      // A tenant's own endpoint goes through the outbound policy (outbound.ts).
      ...sdkEndpoint(credentials.baseUrl, options),
      maxRetries: 0,
      timeout: timeoutMs,
      logLevel: 'off',
    });
  }

  function mapError(error: unknown, deadline: Deadline, started: boolean): unknown {
    if (deadline.abortError() && !(error instanceof ProviderError)) return fallbackError(error, deadline, started);
    if (error instanceof APIConnectionTimeoutError) return new ProviderError('timeout', `${displayName} did not answer within ${timeoutMs} ms`);
    if (error instanceof APIConnectionError) return fallbackError(error, deadline, started);
    if (error instanceof APIError) {
      if (error.status) return httpProviderError(error.status, error.message, error.headers, error.type);
      // An `event: error` inside the stream, e.g. overloaded_error.
      return new ProviderError(kindForStreamError(error.type), `${displayName}: ${error.message}`);
    }
    return fallbackError(error, deadline, started);
  }

  /** An error answer's body: {type: "error", error: {type, message}}, or whatever text came. */
  function httpFailure(failure: StreamFailure): ProviderError {
    let message = failure.body.slice(0, 500) || `HTTP ${failure.status}`;
    let hint: string | null = null;
    try {
      const parsed = JSON.parse(failure.body) as { error?: { type?: string; message?: string } };
      message = parsed.error?.message ?? message;
      hint = parsed.error?.type ?? null;
    } catch {
      // not JSON: the text is the message
    }
    return httpProviderError(failure.status, `${failure.status} ${message}`, failure.headers, hint);
  }

  // Streams go through stream-request.ts (undici, a plain SSE parser) rather
  // than the SDK, for the CPU a thousand streams at once would cost; the SDK
  // still checks keys (validateKey).
  async function complete(request: CompletionRequest, credentials: Credentials): Promise<CompletionResult> {
    if (!credentials.apiKey) throw new ProviderError('invalid_key', `no API key for ${displayName}`);
    const { baseURL } = sdkEndpoint(credentials.baseUrl, options);
    const dispatcher = dispatcherFor(baseURL, { trustedBaseUrl: options.defaultBaseUrl, allowPrivateUrls: options.allowPrivateUrls ?? false });
    const deadline = new Deadline(timeoutMs, request.signal);
    const { system, turns } = toAnthropicMessages(request.messages);
    let text = '';
    // Set inside the event handler (a closure): typed wide so the checks below see them.
    let inputTokens = null as number | null;
    let outputTokens = null as number | null;
    let stopReason = null as string | null;
    let stopped = false;
    let started = false;
    const body = JSON.stringify({
      model: request.model,
      max_tokens: request.maxOutputTokens ?? DEFAULT_MAX_TOKENS,
      messages: turns,
      ...(system === undefined ? {} : { system }),
      stream: true,
    });
    try {
      await postEventStream(
        `${baseURL.replace(/\/+$/, '')}/v1/messages`,
        { headers: { 'x-api-key': credentials.apiKey, 'anthropic-version': ANTHROPIC_VERSION }, body, signal: deadline.signal, dispatcher },
        (message) => {
          started = true;
          deadline.touch();
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
              if (event.delta?.type !== 'text_delta' || !event.delta.text) return;
              text += event.delta.text;
              // Awaited only when the caller's handler returns a promise.
              return deliverDelta(request.onDelta, event.delta.text);
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
              // An `event: error` inside the stream, e.g. overloaded_error.
              throw new ProviderError(kindForStreamError(event.error?.type), `${displayName}: ${event.error?.message ?? 'error in the stream'}`);
          }
        },
      );
      const aborted = deadline.abortError();
      if (aborted) throw aborted;
    } catch (error) {
      // Once message_delta brought the stop reason the answer is whole.
      if (error instanceof DeltaHandlerError || stopReason === null || deadline.callerAborted) {
        throw error instanceof StreamHttpError ? httpFailure(error.failure) : fallbackError(error, deadline, started);
      }
    } finally {
      deadline.dispose();
    }
    if (stopReason === null) {
      throw new ProviderError('interrupted', `${displayName} ended the stream ${stopped ? 'without a stop reason' : 'before message_stop'}`);
    }
    return {
      text,
      inputTokens: inputTokens ?? estimateInputTokens(request.messages),
      outputTokens: outputTokens || estimateTokens(text),
      finishReason: normalizeFinishReason(stopReason),
    };
  }

  async function validateKey(credentials: Credentials, signal?: AbortSignal): Promise<{ valid: true } | { valid: false; reason: string }> {
    if (!credentials.apiKey) return { valid: false, reason: 'no API key given' };
    const anthropic = client(credentials);
    const deadline = new Deadline(timeoutMs, signal);
    try {
      await anthropic.models.list({ limit: 1 }, { signal: deadline.signal });
      return { valid: true };
    } catch (error) {
      const mapped = mapError(error, deadline, false);
      if (mapped instanceof ProviderError && mapped.kind === 'invalid_key') {
        return { valid: false, reason: `${displayName} refused the key (${mapped.status ?? 'no status'})` };
      }
      throw mapped;
    } finally {
      deadline.dispose();
    }
  }

  return { id: 'anthropic', displayName, needsKey: true, models: options.models, complete, validateKey };
}
