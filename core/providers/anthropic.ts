// Adapter for Anthropic's Messages API with the official SDK. System
// messages travel in `system`; usage comes from message_start and
// message_delta. The SDK's retries are off: our job queue retries.
import Anthropic, { APIConnectionError, APIConnectionTimeoutError, APIError } from '@anthropic-ai/sdk';
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
  normalizeFinishReason,
} from './errors.ts';
import { sdkEndpoint } from './outbound.ts';
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
const promptTokens = (u: { input_tokens: number | null; cache_creation_input_tokens?: number | null; cache_read_input_tokens?: number | null }) =>
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

  async function complete(request: CompletionRequest, credentials: Credentials): Promise<CompletionResult> {
    const anthropic = client(credentials);
    const deadline = new Deadline(timeoutMs, request.signal);
    const { system, turns } = toAnthropicMessages(request.messages);
    let text = '';
    let inputTokens: number | null = null;
    let outputTokens: number | null = null;
    let stopReason: string | null = null;
    let stopped = false;
    let started = false;
    try {
      const stream = await anthropic.messages.create(
        {
          model: request.model,
          max_tokens: request.maxOutputTokens ?? DEFAULT_MAX_TOKENS,
          messages: turns,
          ...(system === undefined ? {} : { system }),
          stream: true,
        },
        { signal: deadline.signal },
      );
      started = true;
      deadline.touch();
      for await (const event of stream) {
        deadline.touch();
        switch (event.type) {
          case 'message_start': {
            // Optional-chained: Anthropic-compatible servers do not all send usage.
            const u = event.message.usage as Anthropic.Usage | undefined;
            if (u) {
              inputTokens = promptTokens(u);
              outputTokens = u.output_tokens;
            }
            break;
          }
          case 'content_block_delta':
            if (event.delta.type === 'text_delta') {
              text += event.delta.text;
              await emitDelta(request.onDelta, event.delta.text);
            }
            break;
          case 'message_delta':
            // Counts here are cumulative, so they replace what message_start said.
            if (event.usage) {
              outputTokens = event.usage.output_tokens;
              if (event.usage.input_tokens != null) inputTokens = promptTokens(event.usage);
            }
            if (event.delta.stop_reason) stopReason = event.delta.stop_reason;
            break;
          case 'message_stop':
            stopped = true;
            break;
        }
      }
      const aborted = deadline.abortError();
      if (aborted) throw aborted;
    } catch (error) {
      // Once message_delta brought the stop reason the answer is whole.
      if (error instanceof DeltaHandlerError || stopReason === null || deadline.callerAborted) {
        throw mapError(error, deadline, started);
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
