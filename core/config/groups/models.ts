// Model providers: where they are reached, and the platform's own keys.
import { group, setting } from '../declare.ts';
import { boolFromEnv, intFromEnv, nonEmpty, urlFromEnv } from '../parsers.ts';

const endpoint = (provider: string) => `Where ${provider} is reached (a tenant's key may carry its own base URL)`;
const platformKey = (provider: string) => `The platform's ${provider} key, used for tenants on credits`;

export const models = group('Model providers', 'See [Chat, models, provider keys, usage](chat-and-models.md).', {
  PROVIDER_TIMEOUT_MS: setting(intFromEnv(1_000, 600_000), {
    default: 60_000,
    doc: 'Give up on a model when nothing arrived for this long (a steady stream is never cut)',
  }),
  PROVIDER_ALLOW_PRIVATE_URLS: setting(boolFromEnv, {
    default: false,
    doc: "Let a tenant's own base URL lead to loopback, private and link-local addresses (only where tenants legitimately run models on your private network)",
  }),
  OPENAI_BASE_URL: setting(urlFromEnv, { default: 'https://api.openai.com/v1', doc: endpoint('OpenAI') }),
  ANTHROPIC_BASE_URL: setting(urlFromEnv, { default: 'https://api.anthropic.com', doc: endpoint('Anthropic') }),
  OPENROUTER_BASE_URL: setting(urlFromEnv, { default: 'https://openrouter.ai/api/v1', doc: endpoint('OpenRouter') }),
  OLLAMA_BASE_URL: setting(urlFromEnv, { default: 'http://127.0.0.1:11434/v1', doc: endpoint('Ollama') }),
  PLATFORM_OPENAI_API_KEY: setting(nonEmpty, { doc: platformKey('OpenAI') }),
  PLATFORM_ANTHROPIC_API_KEY: setting(nonEmpty, { doc: platformKey('Anthropic') }),
  PLATFORM_OPENROUTER_API_KEY: setting(nonEmpty, { doc: platformKey('OpenRouter') }),
  NEW_TENANT_CREDITS_MICROS: setting(intFromEnv(0, 1_000_000_000), {
    default: 5_000_000,
    doc: "Credits (micro-dollars) each workspace a person creates gets, once (an agent's own workspace from registration gets none)",
  }),
});
