// Where the sandbox keeps its objects: one row per object in
// billing_sandbox_objects, so every api and worker process sees the same
// Stripe. Writers lock the row they change (select ... for update), so two
// racing changes of one subscription apply one after the other.
import { z } from 'zod';
import { sql, type CommonQueryMethods } from '../../db/pool.ts';
import type { Json, Subscription } from './objects.ts';

const DataRow = z.object({ data: z.record(z.string(), z.unknown()) });

/** Fields kept for the sandbox itself, never answered. */
const PRIVATE = '_sandbox';

export function publicView<T extends Json>(data: T): T {
  if (!(PRIVATE in data)) return data;
  const { [PRIVATE]: _hidden, ...rest } = data;
  return rest as T;
}

export async function loadObject<T extends Json = Json>(
  q: CommonQueryMethods,
  id: string,
  object: string,
  options: { lock?: boolean } = {},
): Promise<T | null> {
  const lock = options.lock ? sql.fragment`for update` : sql.fragment``;
  const data = await q.maybeOneFirst(sql.type(DataRow)`
    select data from billing_sandbox_objects where id = ${id} and object = ${object} ${lock}`);
  return (data as T | null) ?? null;
}

export async function saveObject(q: CommonQueryMethods, data: Json & { id: string; object: string }): Promise<void> {
  await q.query(sql.unsafe`
    insert into billing_sandbox_objects (id, object, data) values (${data.id}, ${data.object}, ${sql.jsonb(data as never)})
    on conflict (id) do update set data = excluded.data`);
}

/** A customer's subscriptions, newest first; status 'all' or a status, default everything but canceled. */
export async function subscriptionsOfCustomer(
  q: CommonQueryMethods,
  filter: { customer: string | null; status: string | null; limit: number },
): Promise<Subscription[]> {
  const customer =
    filter.customer === null ? sql.fragment`true` : sql.fragment`data ->> 'customer' = ${filter.customer}`;
  const status =
    filter.status === 'all'
      ? sql.fragment`true`
      : filter.status === null
        ? sql.fragment`data ->> 'status' <> 'canceled'`
        : filter.status === 'ended'
          ? sql.fragment`data ->> 'status' in ('canceled', 'incomplete_expired')`
          : sql.fragment`data ->> 'status' = ${filter.status}`;
  const rows = await q.anyFirst(sql.type(DataRow)`
    select data from billing_sandbox_objects
     where object = 'subscription' and ${customer} and ${status}
     order by (data ->> 'created')::bigint desc, id desc
     limit ${filter.limit}`);
  return rows as Subscription[];
}

/** The subscription holding an item, locked for a change. */
export async function subscriptionOfItem(q: CommonQueryMethods, itemId: string): Promise<Subscription | null> {
  const data = await q.maybeOneFirst(sql.type(DataRow)`
    select data from billing_sandbox_objects
     where object = 'subscription' and data -> 'items' -> 'data' @> ${sql.jsonb([{ id: itemId }])}
     for update`);
  return (data as Subscription | null) ?? null;
}

// ------------------------------------------------------------ idempotency

export type StoredResponse = { fingerprint: string; status: number; response: Json };

/**
 * Claims an idempotency key inside the caller's transaction. The primary key
 * makes a racing request with the same key wait here until the first one
 * commits (then it finds the stored answer) or rolls back (then it claims the
 * key itself). Keys older than 24 hours are reused, as Stripe expires them.
 * Returns null when claimed, else the stored answer.
 */
export async function claimIdempotencyKey(
  q: CommonQueryMethods,
  key: string,
  fingerprint: string,
): Promise<StoredResponse | null> {
  const claimed = await q.maybeOneFirst(sql.type(z.object({ key: z.string() }))`
    insert into billing_sandbox_idempotency (key, fingerprint, status, response) values (${key}, ${fingerprint}, 0, '{}')
    on conflict (key) do update set fingerprint = excluded.fingerprint, status = 0, response = '{}', created_at = now()
     where billing_sandbox_idempotency.created_at < now() - interval '24 hours'
    returning key`);
  if (claimed) return null;
  return q.one(sql.type(
    z.object({ fingerprint: z.string(), status: z.number(), response: z.record(z.string(), z.unknown()) }),
  )`
    select fingerprint, status, response from billing_sandbox_idempotency where key = ${key}`);
}

export async function storeIdempotentResponse(
  q: CommonQueryMethods,
  key: string,
  status: number,
  response: Json,
): Promise<void> {
  await q.query(sql.unsafe`
    update billing_sandbox_idempotency set status = ${status}, response = ${sql.jsonb(response as never)} where key = ${key}`);
}
