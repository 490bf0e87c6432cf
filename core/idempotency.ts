// Idempotency keys: the first request with a key records its outcome in the
// same transaction as its effects; an identical retry (same fingerprint)
// gets that outcome back without doing anything; the key with a different
// request is a conflict. A concurrent identical request waits on the row
// lock of the first one's insert and then replays it, so a race creates
// exactly one effect. Records expire after 24 hours.
import { createHash } from 'node:crypto';
import { z } from 'zod';
import { sql, type CommonQueryMethods } from './db/pool.ts';

export type IdempotencyClaim =
  | { kind: 'new' }
  | { kind: 'replay'; status: number; body: unknown }
  | { kind: 'conflict' }
  | { kind: 'in_progress' };

/** A stable hash of what makes two requests the same request. */
export function fingerprint(parts: unknown): string {
  return createHash('sha256').update(canonicalJson(parts)).digest('hex');
}

function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined).sort(([a], [b]) => (a < b ? -1 : 1));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value ?? null);
}

const Existing = z.object({
  fingerprint: z.string(),
  state: z.enum(['in_progress', 'completed']),
  response_status: z.number().nullable(),
  response_body: z.unknown(),
});

export async function claimIdempotencyKey(
  tx: CommonQueryMethods,
  input: { scope: string; tenantId: string; key: string; fingerprint: string },
): Promise<IdempotencyClaim> {
  // An expired record frees its key for a new request.
  const inserted = await tx.maybeOneFirst(sql.type(z.object({ ok: z.boolean() }))`
    insert into idempotency_records (scope, tenant_id, key, fingerprint)
    values (${input.scope}, ${input.tenantId}, ${input.key}, ${input.fingerprint})
    on conflict (scope, tenant_id, key) do update
      set fingerprint = excluded.fingerprint, state = 'in_progress', response_status = null, response_body = null,
          created_at = now(), expires_at = now() + interval '24 hours'
      where idempotency_records.expires_at <= now()
    returning true as ok`);
  if (inserted) return { kind: 'new' };
  const existing = await tx.one(sql.type(Existing)`
    select fingerprint, state, response_status, response_body from idempotency_records
    where scope = ${input.scope} and tenant_id = ${input.tenantId} and key = ${input.key}`);
  if (existing.fingerprint !== input.fingerprint) return { kind: 'conflict' };
  if (existing.state === 'in_progress') return { kind: 'in_progress' };
  return { kind: 'replay', status: existing.response_status ?? 200, body: existing.response_body };
}

export async function recordIdempotentResponse(
  tx: CommonQueryMethods,
  input: { scope: string; tenantId: string; key: string; status: number; body: unknown },
): Promise<void> {
  await tx.query(sql.unsafe`
    update idempotency_records set state = 'completed', response_status = ${input.status}, response_body = ${sql.jsonb(input.body as never)}
    where scope = ${input.scope} and tenant_id = ${input.tenantId} and key = ${input.key}`);
}
