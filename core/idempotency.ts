// Idempotency keys: the first request with a key records its outcome in the
// same transaction as its effects; an identical retry (same fingerprint)
// gets that outcome back without doing anything; the key with a different
// request is a conflict. A concurrent identical request waits on the row
// lock of the first one's insert and then replays it, so a race creates
// exactly one effect. Records expire after 24 hours.
//
// A claim committed on its own (the Agent API claims before its operation
// runs) carries an owner lease: the owner renews it while it runs, and an
// identical request that finds the claim in progress with its lease run out
// takes it over in the claim's one statement (the row lock makes exactly one
// of racing takers win). Renewals and the outcome are fenced by the owner,
// so a request that lost its claim records nothing over its successor.
import { createHash } from 'node:crypto';
import { z } from 'zod';
import { sql, type CommonQueryMethods } from './db/pool.ts';

export type IdempotencyClaim =
  | { kind: 'new' }
  | { kind: 'replay'; status: number; body: unknown }
  | { kind: 'conflict' }
  | { kind: 'in_progress' };

/** Who holds an in-progress claim, and for how long each renewal lasts. */
export type Lease = { owner: string; ms: number };
type Key = { scope: string; tenantId: string; key: string };

/** A stable hash of what makes two requests the same request. */
export function fingerprint(parts: unknown): string {
  return createHash('sha256').update(canonicalJson(parts)).digest('hex');
}

function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : 1));
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

const leaseEnd = (ms: number) => sql.fragment`now() + make_interval(secs => ${ms / 1000})`;
const sameKey = (input: Key) =>
  sql.fragment`scope = ${input.scope} and tenant_id = ${input.tenantId} and key = ${input.key}`;

export async function claimIdempotencyKey(
  tx: CommonQueryMethods,
  input: Key & { fingerprint: string; lease: Lease },
): Promise<IdempotencyClaim> {
  // An expired record frees its key for a new request; an in-progress claim
  // of the same request whose lease ran out is taken over. Rows from before
  // leases existed count their lease from created_at.
  const inserted = await tx.maybeOneFirst(sql.type(z.object({ ok: z.boolean() }))`
    insert into idempotency_records (scope, tenant_id, key, fingerprint, lease_owner, lease_expires_at)
    values (${input.scope}, ${input.tenantId}, ${input.key}, ${input.fingerprint}, ${input.lease.owner}, ${leaseEnd(input.lease.ms)})
    on conflict (scope, tenant_id, key) do update
      set fingerprint = excluded.fingerprint, state = 'in_progress', response_status = null, response_body = null,
          created_at = now(), expires_at = now() + interval '24 hours',
          lease_owner = excluded.lease_owner, lease_expires_at = excluded.lease_expires_at
      where idempotency_records.expires_at <= now()
         or (idempotency_records.state = 'in_progress' and idempotency_records.fingerprint = excluded.fingerprint
             and coalesce(idempotency_records.lease_expires_at, idempotency_records.created_at + make_interval(secs => ${input.lease.ms / 1000})) <= now())
    returning true as ok`);
  if (inserted) return { kind: 'new' };
  const existing = await tx.one(sql.type(Existing)`
    select fingerprint, state, response_status, response_body from idempotency_records where ${sameKey(input)}`);
  if (existing.fingerprint !== input.fingerprint) return { kind: 'conflict' };
  if (existing.state === 'in_progress') return { kind: 'in_progress' };
  return { kind: 'replay', status: existing.response_status ?? 200, body: existing.response_body };
}

/** Extends the owner's lease; false when the claim is no longer its own (finished or taken over). */
export async function renewIdempotencyLease(tx: CommonQueryMethods, input: Key & { lease: Lease }): Promise<boolean> {
  const { rowCount } = await tx.query(sql.unsafe`
    update idempotency_records set lease_expires_at = ${leaseEnd(input.lease.ms)}
    where ${sameKey(input)} and state = 'in_progress' and lease_owner = ${input.lease.owner}`);
  return rowCount > 0;
}

/**
 * Records the outcome. With an owner, only while the claim is still that
 * owner's: false means it was taken over and nothing was written.
 */
export async function recordIdempotentResponse(
  tx: CommonQueryMethods,
  input: Key & { status: number; body: unknown; owner?: string },
): Promise<boolean> {
  const fence =
    input.owner === undefined
      ? sql.fragment`true`
      : sql.fragment`state = 'in_progress' and lease_owner = ${input.owner}`;
  const { rowCount } = await tx.query(sql.unsafe`
    update idempotency_records
    set state = 'completed', response_status = ${input.status}, response_body = ${sql.jsonb(input.body as never)}, lease_expires_at = null
    where ${sameKey(input)} and ${fence}`);
  return rowCount > 0;
}

/** Drops the owner's claim, so the identical retry runs; false when it was not the owner's any more. */
export async function releaseIdempotencyClaim(
  tx: CommonQueryMethods,
  input: Key & { owner: string },
): Promise<boolean> {
  const { rowCount } = await tx.query(sql.unsafe`
    delete from idempotency_records where ${sameKey(input)} and state = 'in_progress' and lease_owner = ${input.owner}`);
  return rowCount > 0;
}
