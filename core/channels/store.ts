// The channel_links row of a tenant's channel: its settings (secrets sealed
// with AES-256-GCM, bound to tenant, channel and name), its state and its
// binding. Only openSettings decrypts; every view for people is masked.
import { z } from 'zod';
import type { Keyring } from '../crypto/keyring.ts';
import { sql, type CommonQueryMethods } from '../db/pool.ts';
import { maskKey } from '../provider-keys/keys.ts';
import { CHANNEL_STATES, type ChannelAdapter, type ChannelSettings } from './types.ts';

const Sealed = z.object({ k: z.string(), c: z.string(), l: z.string() });

export const LinkRow = z.object({
  id: z.string(),
  tenant_id: z.string(),
  channel: z.string(),
  state: z.enum(CHANNEL_STATES),
  inbound_id: z.string().nullable(),
  config: z.record(z.string(), z.string()),
  secrets: z.record(z.string(), Sealed),
  link_code_hash: z.string().nullable(),
  link_expires_at: z.string().nullable(),
  link_job_id: z.string().nullable(),
  link_awaiting: z.boolean(),
  link_prev_state: z.string().nullable(),
  bound_ref: z.string().nullable(),
  account: z.record(z.string(), z.unknown()).nullable(),
  session_id: z.string().nullable(),
  linked_by: z.string().nullable(),
  linked_at: z.string().nullable(),
  inbound_count: z.number(),
  outbound_count: z.number(),
  last_inbound_at: z.string().nullable(),
  last_outbound_at: z.string().nullable(),
  last_error: z.string().nullable(),
  last_error_at: z.string().nullable(),
  created_at: z.string(),
  updated_at: z.string(),
});
export type LinkRow = z.infer<typeof LinkRow>;
export const linkRow = sql.type(LinkRow);

const aad = (tenantId: string, channel: string, name: string) => `channel-secret:${tenantId}:${channel}:${name}`;

export function sealSecret(
  keyring: Keyring,
  tenantId: string,
  channel: string,
  name: string,
  value: string,
): z.infer<typeof Sealed> {
  const { keyId, ciphertext } = keyring.seal(value, aad(tenantId, channel, name));
  return { k: keyId, c: ciphertext, l: value.slice(-4) };
}

export function openSettings(
  keyring: Keyring,
  row: Pick<LinkRow, 'tenant_id' | 'channel' | 'config' | 'secrets'>,
): ChannelSettings {
  const secrets: Record<string, string> = {};
  for (const [name, s] of Object.entries(row.secrets))
    secrets[name] = keyring.open(s.k, s.c, aad(row.tenant_id, row.channel, name));
  return { config: row.config, secrets };
}

export async function findLink(
  db: CommonQueryMethods,
  tenantId: string,
  channel: string,
  lock = false,
): Promise<LinkRow | null> {
  return db.maybeOne(
    linkRow`select * from channel_links where tenant_id = ${tenantId} and channel = ${channel} ${lock ? sql.fragment`for update` : sql.fragment``}`,
  );
}

export async function findLinkByInbound(
  db: CommonQueryMethods,
  channel: string,
  inboundId: string,
): Promise<LinkRow | null> {
  return db.maybeOne(linkRow`select * from channel_links where inbound_id = ${inboundId} and channel = ${channel}`);
}

/** Stores the given settings (absent fields keep their value); secrets are sealed. */
export async function saveConfig(
  db: CommonQueryMethods,
  keyring: Keyring,
  adapter: ChannelAdapter,
  tenantId: string,
  input: Record<string, string | undefined>,
): Promise<LinkRow> {
  const config: Record<string, string> = {};
  const secrets: Record<string, z.infer<typeof Sealed>> = {};
  for (const [name, value] of Object.entries(input)) {
    if (value === undefined) continue;
    if (adapter.secretFields.includes(name)) secrets[name] = sealSecret(keyring, tenantId, adapter.id, name, value);
    else config[name] = value;
  }
  return db.one(linkRow`
    insert into channel_links (tenant_id, channel, config, secrets, inbound_id)
    values (${tenantId}, ${adapter.id}, ${sql.jsonb(config)}, ${sql.jsonb(secrets)}, gen_random_uuid())
    on conflict (tenant_id, channel) do update
      set config = channel_links.config || excluded.config, secrets = channel_links.secrets || excluded.secrets,
          inbound_id = coalesce(channel_links.inbound_id, excluded.inbound_id), updated_at = now()
    returning *`);
}

export type MaskedConfig = {
  config: Record<string, string>;
  secrets: Record<string, { set: boolean; masked: string | null }>;
};

export function maskedConfig(adapter: ChannelAdapter, row: LinkRow | null): MaskedConfig {
  const secrets: MaskedConfig['secrets'] = {};
  for (const name of adapter.secretFields) {
    const s = row?.secrets[name];
    secrets[name] = { set: !!s, masked: s ? maskKey(s.l) : null };
  }
  return { config: row?.config ?? {}, secrets };
}

/** enable/disable: only a bound channel; null when there is nothing to switch. */
export async function switchChannel(
  db: CommonQueryMethods,
  tenantId: string,
  channel: string,
  enabled: boolean,
): Promise<LinkRow | null> {
  return db.maybeOne(linkRow`
    update channel_links set state = ${enabled ? 'enabled' : 'disabled'}, updated_at = now(),
      last_error = case when ${enabled} then null else last_error end
    where tenant_id = ${tenantId} and channel = ${channel} and bound_ref is not null
      and state in ('linked', 'enabled', 'disabled', 'error')
    returning *`);
}

/** Counters and the last error of a channel (activity and status). */
export async function recordChannelError(db: CommonQueryMethods, linkId: string, reason: string): Promise<void> {
  await db.query(sql.unsafe`
    update channel_links set state = 'error', last_error = ${reason.slice(0, 500)}, last_error_at = now(), updated_at = now() where id = ${linkId}`);
}
