// Which model providers the platform itself holds a key for (PLATFORM_*_API_KEY),
// as the worker processes see it: they make the calls, so each writes its
// view at start (platform_provider_keys, migration 0038). A chat send whose
// model no key can serve — the tenant has none of its own and the platform
// none either — is then refused at once (PROVIDER_KEY_MISSING) instead of
// being accepted and failing in the worker.
import type { Config } from '../config.ts';
import { sql, type CommonQueryMethods } from '../db/pool.ts';
import { KEYED_PROVIDERS } from '../providers/types.ts';
import { providerFor } from '../providers/registry.ts';

export async function recordPlatformProviderKeys(db: CommonQueryMethods, config: Config): Promise<void> {
  const keys = config.providers.platformKeys as Partial<Record<string, string>>;
  // Providers that need no key (a local Ollama) are never refused for lack of one.
  const rows = KEYED_PROVIDERS.filter((p) => providerFor(p, config.providers).needsKey).map((provider) => ({
    provider,
    configured: Boolean(keys[provider]),
  }));
  await db.query(sql.unsafe`
    insert into platform_provider_keys (provider, configured)
    select provider, configured from jsonb_to_recordset(${sql.jsonb(rows)}) as r(provider text, configured boolean)
    on conflict (provider) do update set configured = excluded.configured, updated_at = now()`);
}
