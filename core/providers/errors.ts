// What the adapters share: turning HTTP failures into ProviderError kinds,
// a deadline that also covers a stream going quiet, and token estimates.
import { blockedCause } from './outbound.ts';
import { ProviderError, type ChatMessage, type ProviderErrorKind } from './types.ts';

/** Used when neither the caller nor the config sets one. */
export const DEFAULT_TIMEOUT_MS = 60_000;

/** Rough token count (~4 characters a token) for servers that report no usage. */
export function estimateTokens(text: string): number {
  return text.length === 0 ? 0 : Math.ceil(text.length / 4);
}

export function estimateInputTokens(messages: readonly ChatMessage[]): number {
  // A few tokens a message for the role markup the providers add.
  return messages.reduce((sum, m) => sum + estimateTokens(m.content) + 4, 0);
}

/** Milliseconds to wait from retry-after-ms, retry-after (seconds or an HTTP date). */
export function retryAfterMs(headers: { get(name: string): string | null } | undefined | null): number | undefined {
  if (!headers) return undefined;
  const ms = Number(headers.get('retry-after-ms'));
  if (headers.get('retry-after-ms') && Number.isFinite(ms) && ms >= 0) return Math.round(ms);
  const value = headers.get('retry-after');
  if (!value) return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds)) return Math.max(0, Math.round(seconds * 1000));
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, date - Date.now());
}

/** The kind of an HTTP error status; `hint` is the body's error type or code. */
export function kindForStatus(status: number, hint?: string | null): ProviderErrorKind {
  if (status === 429) return 'rate_limited';
  if (status === 401 || status === 403) return 'invalid_key';
  if (status === 404) return 'model_not_found';
  // Transient (the providers' own SDKs retry these two): the queue retries them.
  if (status === 408) return 'timeout';
  if (status === 409) return 'unavailable';
  if (status >= 500) return 'unavailable'; // includes Anthropic's 529 overloaded
  // Some servers (OpenRouter, vLLM) answer an unknown model with 400.
  if (hint === 'model_not_found') return 'model_not_found';
  return 'bad_request';
}

/** The kind of an error event inside a stream, which carries a type but no status. */
export function kindForStreamError(type: string | null | undefined): ProviderErrorKind {
  switch (type) {
    case 'rate_limit_error':
    case 'rate_limit_exceeded':
      return 'rate_limited';
    case 'overloaded_error':
    case 'api_error':
    case 'server_error':
      return 'unavailable';
    case 'authentication_error':
    case 'permission_error':
      return 'invalid_key';
    case 'not_found_error':
      return 'model_not_found';
    case 'invalid_request_error':
      return 'bad_request';
    default:
      return 'interrupted';
  }
}

/** An error event inside a stream (it has a type or code but no status) as a ProviderError. */
export function streamEventError(
  displayName: string,
  type: string | null | undefined,
  message: string | undefined,
): ProviderError {
  return new ProviderError(kindForStreamError(type), `${displayName}: ${message ?? 'error in the stream'}`);
}

export function httpProviderError(
  status: number,
  message: string,
  headers?: { get(name: string): string | null } | null,
  hint?: string | null,
): ProviderError {
  const kind = kindForStatus(status, hint);
  return new ProviderError(
    kind,
    message,
    status,
    kind === 'rate_limited' || kind === 'unavailable' ? retryAfterMs(headers) : undefined,
  );
}

/** Wraps an error thrown by the caller's onDelta so it passes through unmapped. */
export class DeltaHandlerError extends Error {
  constructor(readonly original: unknown) {
    super('onDelta failed');
  }
}

/**
 * Hands a delta to the caller's handler: a promise it returns is awaited (in
 * order), none is made when it returns none (a stream's hot path); what it
 * throws passes through as DeltaHandlerError.
 */
export function deliverDelta(
  onDelta: ((d: string) => void | Promise<void>) | undefined,
  delta: string,
): void | Promise<void> {
  if (!onDelta || delta === '') return;
  let outcome: void | Promise<void>;
  try {
    outcome = onDelta(delta);
  } catch (error) {
    throw new DeltaHandlerError(error);
  }
  if (outcome && typeof (outcome as Promise<void>).then === 'function') {
    return (outcome as Promise<void>).catch((error: unknown) => {
      throw new DeltaHandlerError(error);
    });
  }
}

/**
 * One AbortSignal for a provider call: fires when the caller aborts or when
 * nothing arrived for `idleMs`. A timeout that stopped at the response
 * headers would let a stream that goes quiet wait forever; an idle deadline
 * (reset by `touch()` on every event) lets a long answer that keeps
 * streaming finish.
 */
export class Deadline {
  readonly signal: AbortSignal;
  timedOut = false;
  private readonly controller = new AbortController();
  private timer: NodeJS.Timeout | undefined;
  private readonly onCallerAbort = () => this.controller.abort(this.caller?.reason);

  constructor(
    private readonly idleMs: number,
    private readonly caller?: AbortSignal,
  ) {
    this.signal = this.controller.signal;
    if (caller?.aborted) this.controller.abort(caller.reason);
    else caller?.addEventListener('abort', this.onCallerAbort, { once: true });
    this.touch();
  }

  /** Something arrived: the idle clock starts again (one timer per call, checked when it fires). */
  touch(): void {
    this.lastTouch = performance.now();
    if (!this.timer && !this.controller.signal.aborted) this.arm(this.idleMs);
  }

  private lastTouch = 0;

  private arm(ms: number): void {
    this.timer = setTimeout(() => {
      this.timer = undefined;
      const idle = performance.now() - this.lastTouch;
      if (idle < this.idleMs) return this.arm(this.idleMs - idle);
      this.timedOut = true;
      this.controller.abort(new Error('provider timeout'));
    }, ms);
  }

  get callerAborted(): boolean {
    return Boolean(this.caller?.aborted);
  }

  /** The error for a call that ended because this deadline fired, if it did. */
  abortError(): unknown {
    if (this.callerAborted) return this.caller!.reason ?? new DOMException('The operation was aborted', 'AbortError');
    if (this.timedOut) return new ProviderError('timeout', `no answer from the provider within ${this.idleMs} ms`);
    return undefined;
  }

  dispose(): void {
    if (this.timer) clearTimeout(this.timer);
    this.caller?.removeEventListener('abort', this.onCallerAbort);
  }
}

/**
 * The last resort of every adapter's catch: an abort by the caller is
 * rethrown as it came, our deadline becomes `timeout`, a caller's onDelta
 * failure passes through, a destination the outbound policy refused is
 * `unavailable` (the provider cannot be reached from here), and anything
 * else (a socket reset, a parse error of a half-received event) is
 * `interrupted` once the response has started and `unavailable` before.
 */
export function fallbackError(error: unknown, deadline: Deadline, started: boolean): unknown {
  if (error instanceof ProviderError) return error;
  if (error instanceof DeltaHandlerError) return error.original;
  const aborted = deadline.abortError();
  if (aborted) return aborted;
  const blocked = blockedCause(error);
  if (blocked) return new ProviderError('unavailable', `the provider address is not allowed: ${blocked.message}`);
  const message = error instanceof Error ? error.message : String(error);
  return started
    ? new ProviderError('interrupted', `the response stream broke off: ${message}`)
    : new ProviderError('unavailable', `could not reach the provider: ${message}`);
}

/** Anthropic and OpenAI-style finish reasons in one vocabulary: stop, length, or the provider's own word. */
export function normalizeFinishReason(reason: string): string {
  if (reason === 'end_turn' || reason === 'stop_sequence') return 'stop';
  if (reason === 'max_tokens') return 'length';
  return reason;
}
