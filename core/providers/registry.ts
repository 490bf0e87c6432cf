// Which adapter serves a model reference ('openai/gpt-4o-mini'), the models
// and prices onboarding offers, and what a turn costs.
import type { Config } from '../config.ts';
import { createAnthropicAdapter } from './anthropic.ts';
import { BUILTIN_MODELS, builtinAdapter } from './builtin.ts';
import { createOpenAICompatibleAdapter } from './openai.ts';
import { PROVIDER_IDS, type KeyedProvider, type ModelInfo, type ProviderAdapter, type ProviderId } from './types.ts';

/** Prices are micro-dollars per million tokens ($0.15/M = 150_000). */
const usd = (dollarsPerMTok: number) => Math.round(dollarsPerMTok * 1_000_000);
const model = (id: string, name: string, contextWindow: number, input: number, output: number): ModelInfo => ({
  id,
  name,
  contextWindow,
  inputPricePerMTokMicros: usd(input),
  outputPricePerMTokMicros: usd(output),
});

export const MODELS: Readonly<Record<ProviderId, readonly ModelInfo[]>> = {
  openai: [model('gpt-4o-mini', 'GPT-4o mini', 128_000, 0.15, 0.6), model('gpt-4o', 'GPT-4o', 128_000, 2.5, 10)],
  anthropic: [
    model('claude-3-5-haiku-latest', 'Claude 3.5 Haiku', 200_000, 0.8, 4),
    model('claude-sonnet-4-0', 'Claude Sonnet 4', 200_000, 3, 15),
  ],
  openrouter: [
    model('openai/gpt-4o-mini', 'GPT-4o mini (OpenRouter)', 128_000, 0.15, 0.6),
    model('anthropic/claude-3.5-haiku', 'Claude 3.5 Haiku (OpenRouter)', 200_000, 0.8, 4),
  ],
  ollama: [model('llama3.2', 'Llama 3.2 (local)', 128_000, 0, 0)],
  builtin: BUILTIN_MODELS,
};

const DISPLAY_NAMES: Readonly<Record<ProviderId, string>> = {
  openai: 'OpenAI',
  anthropic: 'Anthropic',
  openrouter: 'OpenRouter',
  ollama: 'Ollama (local)',
  builtin: builtinAdapter.displayName,
};

/** Endpoints used when neither the config nor the credentials name one. */
const FALLBACK_BASE_URLS: Readonly<Record<KeyedProvider, string>> = {
  openai: 'https://api.openai.com/v1',
  anthropic: 'https://api.anthropic.com',
  openrouter: 'https://openrouter.ai/api/v1',
  ollama: 'http://127.0.0.1:11434/v1',
};

export type ProviderInfo = { id: ProviderId; displayName: string; needsKey: boolean; models: readonly ModelInfo[] };

/** What onboarding shows: every provider, whether it needs a key, its models and prices. */
export const PROVIDERS: readonly ProviderInfo[] = PROVIDER_IDS.map((id) => ({
  id,
  displayName: DISPLAY_NAMES[id],
  needsKey: id === 'openai' || id === 'anthropic' || id === 'openrouter',
  models: MODELS[id],
}));

export const isProviderId = (value: string): value is ProviderId => (PROVIDER_IDS as readonly string[]).includes(value);

/**
 * Settings for the adapters; `config.providers` fits as it is. `timeoutMs`
 * bounds the wait for an answer and for each next piece of a stream;
 * `baseUrls` are the defaults that a credential's own baseUrl overrides;
 * such an own baseUrl may reach private addresses only with
 * `allowPrivateUrls` (core/providers/outbound.ts).
 */
export type ProviderSettings = {
  timeoutMs?: number;
  baseUrls?: Partial<Record<KeyedProvider, string>>;
  allowPrivateUrls?: boolean;
};

/** The adapter for a provider id; throws on an unknown one. */
export function providerFor(id: string, settings: ProviderSettings = {}): ProviderAdapter {
  if (!isProviderId(id)) throw new Error(`unknown model provider: ${id}`);
  if (id === 'builtin') return builtinAdapter;
  const base = {
    displayName: DISPLAY_NAMES[id],
    defaultBaseUrl: settings.baseUrls?.[id] ?? FALLBACK_BASE_URLS[id],
    models: MODELS[id],
    ...(settings.timeoutMs === undefined ? {} : { timeoutMs: settings.timeoutMs }),
    allowPrivateUrls: settings.allowPrivateUrls ?? false,
  };
  if (id === 'anthropic') return createAnthropicAdapter(base);
  return createOpenAICompatibleAdapter({ ...base, id, needsKey: id !== 'ollama' });
}

/**
 * Splits 'provider/model' at the first slash (OpenRouter models have a slash
 * of their own). Null for an unknown provider, an empty model, or a built-in
 * model that does not exist. Other providers' model names pass as given:
 * a tenant's key may reach models our price list does not know.
 */
export function parseModel(ref: string): { provider: ProviderId; model: string } | null {
  const slash = ref.indexOf('/');
  if (slash <= 0 || slash === ref.length - 1) return null;
  const provider = ref.slice(0, slash);
  const name = ref.slice(slash + 1);
  if (!isProviderId(provider)) return null;
  if (provider === 'builtin' && !MODELS.builtin.some((m) => m.id === name)) return null;
  return { provider, model: name };
}

export const modelRef = (provider: ProviderId, modelName: string) => `${provider}/${modelName}`;

export function modelInfo(provider: string, modelName: string): ModelInfo | undefined {
  return isProviderId(provider) ? MODELS[provider].find((m) => m.id === modelName) : undefined;
}

/** Cost of a turn in micro-dollars, rounded up; 0 for a model without a price. */
export function costMicros(provider: string, modelName: string, inputTokens: number, outputTokens: number): number {
  const info = modelInfo(provider, modelName);
  if (!info) return 0;
  const total = inputTokens * info.inputPricePerMTokMicros + outputTokens * info.outputPricePerMTokMicros;
  return Math.ceil(total / 1_000_000);
}

/** The configured endpoint of a provider; undefined for the built-in one. */
export function defaultBaseUrl(config: Pick<Config, 'providers'>, provider: ProviderId): string | undefined {
  return provider === 'builtin' ? undefined : config.providers.baseUrls[provider];
}
