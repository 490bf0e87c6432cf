// The contract every model provider adapter meets. A chat turn streams
// through `complete`; onboarding checks keys through `validateKey`.
export const PROVIDER_IDS = ['openai', 'anthropic', 'openrouter', 'ollama', 'builtin'] as const;
export type ProviderId = (typeof PROVIDER_IDS)[number];

/** Providers a tenant may store its own key for (`:provider` of /api/provider-keys). */
export const KEYED_PROVIDERS = ['openai', 'anthropic', 'openrouter', 'ollama'] as const;
export type KeyedProvider = (typeof KEYED_PROVIDERS)[number];

export type ChatRole = 'system' | 'user' | 'assistant';
export type ChatMessage = { role: ChatRole; content: string };

export type Credentials = {
  /** Absent for providers that need none (builtin, a local Ollama). */
  apiKey?: string;
  /** Overrides the provider's default endpoint (Ollama, vLLM, a test server). */
  baseUrl?: string;
};

export type CompletionRequest = {
  /** The provider's own model name, e.g. gpt-4o-mini (without the provider prefix). */
  model: string;
  messages: ChatMessage[];
  maxOutputTokens?: number;
  signal?: AbortSignal;
  /** Called with each piece of text as it streams in, in order. */
  onDelta?: (delta: string) => void | Promise<void>;
};

export type CompletionResult = {
  text: string;
  inputTokens: number;
  outputTokens: number;
  finishReason: string;
};

export type ProviderErrorKind =
  | 'rate_limited' // 429: retry after backoff
  | 'unavailable' // 5xx, overloaded: retry
  | 'timeout' // no answer in time: retry
  | 'interrupted' // the stream broke off mid-way: retry the whole turn
  | 'invalid_key' // 401/403: permanent
  | 'model_not_found' // permanent
  | 'bad_request'; // 400: permanent

const RETRYABLE: ReadonlySet<ProviderErrorKind> = new Set(['rate_limited', 'unavailable', 'timeout', 'interrupted']);

export class ProviderError extends Error {
  override name = 'ProviderError';
  readonly retryable: boolean;
  constructor(
    readonly kind: ProviderErrorKind,
    message: string,
    readonly status?: number,
    readonly retryAfterMs?: number,
  ) {
    super(message);
    this.retryable = RETRYABLE.has(kind);
  }
}

export type ModelInfo = {
  id: string;
  name: string;
  contextWindow?: number;
  inputPricePerMTokMicros: number;
  outputPricePerMTokMicros: number;
};

export interface ProviderAdapter {
  readonly id: ProviderId;
  readonly displayName: string;
  /** Whether calls need an API key (builtin and Ollama do not). */
  readonly needsKey: boolean;
  /** Models offered in onboarding, with prices used for the usage cost. */
  readonly models: readonly ModelInfo[];
  complete(request: CompletionRequest, credentials: Credentials): Promise<CompletionResult>;
  /** A cheap authenticated call (e.g. list models): invalid_key when refused. */
  validateKey(
    credentials: Credentials,
    signal?: AbortSignal,
  ): Promise<{ valid: true } | { valid: false; reason: string }>;
}
