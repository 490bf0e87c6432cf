// Schemas shared by the provider-key routes and onboarding setup.
import { z } from 'zod';
import { KEYED_PROVIDERS } from '../../../core/providers/types.ts';

export const KeyedProviderId = z.enum(KEYED_PROVIDERS).describe('A provider a tenant may store its own key for');

export const ApiKey = z
  .string()
  .min(8)
  .max(500)
  .regex(/^[\x21-\x7e]+$/, 'printable ASCII without whitespace')
  .describe('The provider API key; stored sealed, never returned except by the resolve route');

// A tenant admin chooses where calls go (Ollama, a proxy, vLLM); only http(s).
// Where it may lead is checked by the routes (base-url.ts), which know the config.
export const BaseUrl = z
  .url({ protocol: /^https?$/, error: 'must be an http:// or https:// URL' })
  .max(500)
  .transform((v) => v.replace(/\/+$/, ''))
  .describe('Overrides the provider endpoint, e.g. a self-hosted Ollama (http or https)');

export const MaskedProviderKey = z
  .object({
    provider: KeyedProviderId,
    masked: z.string().describe('The key masked to its last four characters, e.g. ••••••••abcd'),
    last4: z.string(),
    baseUrl: z.string().nullable(),
    createdAt: z.iso.datetime(),
    updatedAt: z.iso.datetime(),
  })
  .meta({ id: 'MaskedProviderKey' });

export const SavedProviderKey = MaskedProviderKey.pick({
  provider: true,
  masked: true,
  last4: true,
  baseUrl: true,
  updatedAt: true,
}).meta({
  id: 'SavedProviderKey',
});

export const ProviderKeyMode = z
  .object({
    mode: z
      .enum(['user_provided', 'platform_credits'])
      .describe('user_provided when the tenant stored at least one own key'),
    providers: z.array(KeyedProviderId).describe('Providers the tenant has its own key for'),
    creditBalanceMicros: z.int().describe('Remaining platform credits in micro-dollars'),
    creditBalance: z.string().describe('The same in dollars, e.g. "5.00"'),
  })
  .meta({ id: 'ProviderKeyMode' });
