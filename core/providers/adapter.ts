// The one shape of an HTTP model provider. A protocol (anthropic.ts,
// openai.ts) supplies only what differs: paths, auth headers, the request
// body, how its stream events read and where its error bodies keep the
// message. Everything else is here, once: the endpoint and outbound policy,
// the deadline, the streaming transport (stream-request.ts), the mapping of
// HTTP statuses and network failures to ProviderError kinds (errors.ts), and
// the usage fallbacks, and the answer's text made storable (core/storable.ts:
// a NUL or a lone surrogate in it would fail every retry of the turn).
// Nothing retries: our job queue retries a failed turn as a whole.
//
// No provider SDK is used: the stream is ours for its CPU cost
// (stream-request.ts) and the key check is one GET, so an SDK would bring
// only a second HTTP stack and about half a second of CPU to import.
import {
  DEFAULT_TIMEOUT_MS,
  Deadline,
  DeltaHandlerError,
  deliverDelta,
  estimateInputTokens,
  estimateTokens,
  fallbackError,
  httpProviderError,
} from './errors.ts';
import { storableStream } from '../storable.ts';
import { dispatcherFor } from './outbound.ts';
import { getOk, HttpStatusError, postEventStream, type HttpFailure, type StreamEvent } from './stream-request.ts';
import {
  ProviderError,
  type CompletionRequest,
  type CompletionResult,
  type Credentials,
  type ModelInfo,
  type ProviderAdapter,
  type ProviderId,
} from './types.ts';

/** The settings every HTTP provider takes (registry.ts fills them from config.providers). */
export type AdapterOptions = {
  displayName: string;
  /** Used when the credentials carry no baseUrl. */
  defaultBaseUrl: string;
  models: readonly ModelInfo[];
  /** How long to wait for the response, and for each next piece of a stream. */
  timeoutMs?: number;
  /** Lets a credential's own baseUrl lead to private addresses (PROVIDER_ALLOW_PRIVATE_URLS). */
  allowPrivateUrls?: boolean;
};

/** Reads the events of one streamed answer. */
export interface StreamReader {
  /** One event: the text it adds, if any. Throws a ProviderError for an error event. */
  read(event: StreamEvent): string | undefined;
  /** Set once the answer is whole (in our vocabulary: stop, length ...); null until then. */
  finishReason(): string | null;
  /** The token counts the server reported; null for one it did not. */
  usage(): { input: number | null; output: number | null };
  /** Says how a stream that ended without a finish reason ended ("before message_stop"). */
  incomplete(): string;
}

/** What one provider protocol supplies. */
export interface ProviderProtocol {
  readonly id: ProviderId;
  readonly needsKey: boolean;
  /** Appended to the base URL (without its trailing slashes), e.g. /chat/completions. */
  readonly completionPath: string;
  /** A cheap authenticated GET (path and query) that a refused key answers with 401/403. */
  readonly keyCheckPath: string;
  /** Auth and version headers; no key only for a provider that needs none. */
  headers(apiKey: string | undefined): Record<string, string>;
  /** The JSON body of a streaming completion request. */
  body(request: CompletionRequest): unknown;
  /** A fresh reader for each call; `displayName` names the provider in a stream error's message. */
  reader(displayName: string): StreamReader;
  /** The message and error type or code in an error answer's parsed JSON; may throw on a shape it does not know. */
  errorBody(parsed: unknown): { message?: string | undefined; hint?: string | null | undefined };
}

export function createHttpAdapter(protocol: ProviderProtocol, options: AdapterOptions): ProviderAdapter {
  const { displayName } = options;
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;

  /** The URL of `path` at the credential's endpoint, and the connection pool the outbound policy gives it. */
  function endpoint(credentials: Credentials, path: string) {
    const baseUrl = credentials.baseUrl ?? options.defaultBaseUrl;
    const dispatcher = dispatcherFor(baseUrl, {
      trustedBaseUrl: options.defaultBaseUrl,
      allowPrivateUrls: options.allowPrivateUrls ?? false,
    });
    return { url: `${baseUrl.replace(/\/+$/, '')}${path}`, dispatcher };
  }

  /** An error answer: the protocol's message and hint when its body is JSON it knows, else the text itself. */
  function httpFailure(failure: HttpFailure): ProviderError {
    let message = failure.body.slice(0, 500) || `HTTP ${failure.status}`;
    let hint: string | null = null;
    try {
      const parsed = protocol.errorBody(JSON.parse(failure.body));
      message = parsed.message ?? message;
      hint = parsed.hint ?? null;
    } catch {
      // not JSON, or not the protocol's shape: the text is the message
    }
    return httpProviderError(failure.status, `${failure.status} ${message}`, failure.headers, hint);
  }

  const mapFailure = (error: unknown, deadline: Deadline, started: boolean) =>
    error instanceof HttpStatusError ? httpFailure(error.failure) : fallbackError(error, deadline, started);

  async function complete(request: CompletionRequest, credentials: Credentials): Promise<CompletionResult> {
    if (protocol.needsKey && !credentials.apiKey)
      throw new ProviderError('invalid_key', `no API key for ${displayName}`);
    const body = JSON.stringify(protocol.body(request));
    const reader = protocol.reader(displayName);
    const storable = storableStream();
    const deadline = new Deadline(timeoutMs, request.signal);
    let text = '';
    let started = false;
    try {
      // Inside: a base URL the policy refuses by its form is a ProviderError like any other refusal.
      const { url, dispatcher } = endpoint(credentials, protocol.completionPath);
      await postEventStream(
        url,
        { headers: protocol.headers(credentials.apiKey), body, signal: deadline.signal, dispatcher },
        (event) => {
          started = true;
          deadline.touch();
          // A piece may end in half a surrogate pair (held until the next one);
          // the finish reason lets the rest go.
          const piece = reader.read(event) ?? '';
          const delta = storable(piece, reader.finishReason() !== null);
          if (!delta) return;
          text += delta;
          // Awaited only when the caller's handler returns a promise.
          return deliverDelta(request.onDelta, delta);
        },
      );
      const aborted = deadline.abortError();
      if (aborted) throw aborted;
    } catch (error) {
      // Once the finish reason came the answer is whole: a cut after it (say,
      // before OpenAI's usage chunk) only costs us exact token counts.
      if (error instanceof DeltaHandlerError || reader.finishReason() === null || deadline.callerAborted) {
        throw mapFailure(error, deadline, started);
      }
    } finally {
      deadline.dispose();
    }
    const finishReason = reader.finishReason();
    if (finishReason === null)
      throw new ProviderError('interrupted', `${displayName} ended the stream ${reader.incomplete()}`);
    const usage = reader.usage();
    return {
      text,
      inputTokens: usage.input ?? estimateInputTokens(request.messages),
      outputTokens: usage.output ?? estimateTokens(text),
      finishReason,
    };
  }

  async function validateKey(
    credentials: Credentials,
    signal?: AbortSignal,
  ): Promise<{ valid: true } | { valid: false; reason: string }> {
    if (protocol.needsKey && !credentials.apiKey) return { valid: false, reason: 'no API key given' };
    const deadline = new Deadline(timeoutMs, signal);
    try {
      const { url, dispatcher } = endpoint(credentials, protocol.keyCheckPath);
      await getOk(url, { headers: protocol.headers(credentials.apiKey), signal: deadline.signal, dispatcher });
      return { valid: true };
    } catch (error) {
      const mapped = mapFailure(error, deadline, false);
      if (mapped instanceof ProviderError && mapped.kind === 'invalid_key') {
        return { valid: false, reason: `${displayName} refused the key (${mapped.status ?? 'no status'})` };
      }
      throw mapped;
    } finally {
      deadline.dispose();
    }
  }

  return { id: protocol.id, displayName, needsKey: protocol.needsKey, models: options.models, complete, validateKey };
}
