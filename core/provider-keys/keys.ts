// A tenant's own model-provider keys, sealed at rest, and the platform
// credits used when a tenant has none. The chat-turn worker asks
// `credentialsFor` which key pays for a call; everything that shows keys to
// people goes through `listMasked`, and only `resolveKey` ever decrypts.
import { z } from 'zod';
import type { Config } from '../config.ts';
import type { Keyring } from '../crypto/keyring.ts';
import { sql, type CommonQueryMethods } from '../db/pool.ts';
import { defaultBaseUrl, providerFor } from '../providers/registry.ts';
import { KEYED_PROVIDERS, type KeyedProvider, type ProviderId } from '../providers/types.ts';

/** Bound into the ciphertext, so a sealed key copied to another tenant or provider row does not open. */
const associatedData = (tenantId: string, provider: string) => `provider-key:${tenantId}:${provider}`;

export const maskKey = (last4: string) => `••••••••${last4}`;

export type MaskedKey = {
  provider: KeyedProvider;
  masked: string;
  last4: string;
  baseUrl: string | null;
  createdAt: string;
  updatedAt: string;
};

const MetaRow = z.object({
  provider: z.string(),
  last4: z.string(),
  base_url: z.string().nullable(),
  created_at: z.string(),
  updated_at: z.string(),
});
const META = sql.fragment`provider, last4, base_url, created_at, updated_at`;

const toMasked = (row: z.infer<typeof MetaRow>): MaskedKey => ({
  provider: row.provider as KeyedProvider,
  masked: maskKey(row.last4),
  last4: row.last4,
  baseUrl: row.base_url,
  createdAt: row.created_at,
  updatedAt: row.updated_at,
});

export type PutKeyInput = {
  tenantId: string;
  provider: KeyedProvider;
  apiKey: string;
  baseUrl?: string | null;
  userId: string;
};

/** Stores or replaces the tenant's key for a provider; returns the masked view, never the key. */
export async function putKey(db: CommonQueryMethods, keyring: Keyring, input: PutKeyInput): Promise<MaskedKey> {
  const sealed = keyring.seal(input.apiKey, associatedData(input.tenantId, input.provider));
  const row = await db.one(sql.type(MetaRow)`
    insert into provider_keys (tenant_id, provider, key_id, ciphertext, last4, base_url, created_by)
    values (${input.tenantId}, ${input.provider}, ${sealed.keyId}, ${sealed.ciphertext}, ${input.apiKey.slice(-4)},
            ${input.baseUrl ?? null}, ${input.userId})
    on conflict (tenant_id, provider) do update
      set key_id = excluded.key_id, ciphertext = excluded.ciphertext, last4 = excluded.last4,
          base_url = excluded.base_url, created_by = excluded.created_by, updated_at = now()
    returning ${META}`);
  return toMasked(row);
}

/** True when a key was removed. */
export async function deleteKey(db: CommonQueryMethods, tenantId: string, provider: KeyedProvider): Promise<boolean> {
  const { rowCount } = await db.query(
    sql.unsafe`delete from provider_keys where tenant_id = ${tenantId} and provider = ${provider}`,
  );
  return rowCount > 0;
}

export async function listMasked(db: CommonQueryMethods, tenantId: string): Promise<MaskedKey[]> {
  const rows = await db.any(sql.type(MetaRow)`
    select ${META} from provider_keys where tenant_id = ${tenantId} order by provider`);
  return rows.map(toMasked);
}

export type ResolvedKey = { provider: KeyedProvider; apiKey: string; baseUrl: string | null };

/**
 * The decrypted key, or null when the tenant has none. Opens keys sealed
 * under the previous data key too (DATA_ENCRYPTION_KEY_PREVIOUS), so a
 * rotation never strands a stored key.
 */
export async function resolveKey(
  db: CommonQueryMethods,
  keyring: Keyring,
  tenantId: string,
  provider: string,
): Promise<ResolvedKey | null> {
  const row = await db.maybeOne(sql.type(
    z.object({ key_id: z.string(), ciphertext: z.string(), base_url: z.string().nullable() }),
  )`
    select key_id, ciphertext, base_url from provider_keys where tenant_id = ${tenantId} and provider = ${provider}`);
  if (!row) return null;
  return {
    provider: provider as KeyedProvider,
    apiKey: keyring.open(row.key_id, row.ciphertext, associatedData(tenantId, provider)),
    baseUrl: row.base_url,
  };
}

/** baseUrl is undefined only for the built-in provider, which calls nothing. */
export type CallCredentials =
  | { source: 'tenant_key'; apiKey: string; baseUrl?: string }
  | { source: 'platform_credits'; apiKey?: string; baseUrl?: string };

/**
 * Which credentials pay for a call: the tenant's own key when it stored one
 * (its usage is the tenant's business), else the platform's key for that
 * provider, paid from the tenant's credits; providers that need no key
 * (builtin, Ollama) also run on credits without one. Null when neither
 * exists: the provider cannot be used by this tenant. Whether the credits
 * suffice is the caller's check (`spendCredits` when the cost is known).
 */
export async function credentialsFor(
  db: CommonQueryMethods,
  keyring: Keyring,
  config: Config,
  tenantId: string,
  provider: ProviderId,
): Promise<CallCredentials | null> {
  const fallbackUrl = defaultBaseUrl(config, provider);
  // The built-in model takes no key: nothing to look up.
  const own = (KEYED_PROVIDERS as readonly string[]).includes(provider)
    ? await resolveKey(db, keyring, tenantId, provider)
    : null;
  if (own) return { source: 'tenant_key', apiKey: own.apiKey, baseUrl: own.baseUrl ?? fallbackUrl };
  if (!providerFor(provider, config.providers).needsKey) return { source: 'platform_credits', baseUrl: fallbackUrl };
  const platformKey = (config.providers.platformKeys as Partial<Record<ProviderId, string>>)[provider];
  return platformKey ? { source: 'platform_credits', apiKey: platformKey, baseUrl: fallbackUrl } : null;
}

// ---- credits (micro-dollars) ----

const micros = z.coerce.number().int(); // int8 arrives as a BigInt; balances stay far below 2^53

export async function creditBalance(db: CommonQueryMethods, tenantId: string): Promise<number> {
  const balance = await db.maybeOneFirst(sql.type(z.object({ balance_micros: micros }))`
    select balance_micros from tenant_credits where tenant_id = ${tenantId}`);
  return balance ?? 0;
}

/**
 * Takes `amount` micros from the balance in one guarded update, so two
 * concurrent turns can never drive it below zero. False (and nothing taken)
 * when the balance is short or the tenant has no credits row.
 */
export async function spendCredits(tx: CommonQueryMethods, tenantId: string, amount: number): Promise<boolean> {
  if (!Number.isSafeInteger(amount) || amount < 0)
    throw new RangeError(`credit amount must be a non-negative integer, got ${amount}`);
  if (amount === 0) return true;
  const { rowCount } = await tx.query(sql.unsafe`
    update tenant_credits set balance_micros = balance_micros - ${amount}, updated_at = now()
    where tenant_id = ${tenantId} and balance_micros >= ${amount}`);
  return rowCount === 1;
}

/** The new-tenant grant: only when the tenant never had a credits row, so it is given once. */
export async function grantInitialCredits(tx: CommonQueryMethods, tenantId: string, amount: number): Promise<boolean> {
  const { rowCount } = await tx.query(sql.unsafe`
    insert into tenant_credits (tenant_id, balance_micros) values (${tenantId}, ${amount})
    on conflict (tenant_id) do nothing`);
  return rowCount === 1;
}

/** Micro-dollars as a dollar string: 5000000 -> "5.00", 1234 -> "0.001234" (exact, no float rounding). */
export function formatDollars(amountMicros: number): string {
  const sign = amountMicros < 0 ? '-' : '';
  const abs = Math.abs(amountMicros);
  const whole = Math.floor(abs / 1_000_000);
  const fraction = String(abs % 1_000_000)
    .padStart(6, '0')
    .replace(/0+$/, '')
    .padEnd(2, '0');
  return `${sign}${whole}.${fraction}`;
}

/** One row of the provider-key audit trail (never the key itself). */
export async function auditKey(
  db: CommonQueryMethods,
  entry: {
    tenantId: string;
    provider: string;
    action: 'saved' | 'deleted' | 'resolved';
    userId: string | null;
    requestId?: string;
  },
): Promise<void> {
  await db.query(sql.unsafe`
    insert into provider_key_audit (tenant_id, provider, action, user_id, request_id)
    values (${entry.tenantId}, ${entry.provider}, ${entry.action}, ${entry.userId}, ${entry.requestId ?? null})`);
}
