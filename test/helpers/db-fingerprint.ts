// A cheap fingerprint of what is stored: per table, the row count and a sum
// of the rows' xmin (changed by every insert, update and delete), so "nothing
// was written" is a comparison of two fingerprints. Bookkeeping tables that
// every request may touch by design are left out (each with its reason).
import pg from 'pg';
import type { Test } from 'tap';

export const BOOKKEEPING_TABLES: Record<string, string> = {
  rate_limit_windows: 'rate limits count every request, refused ones too',
  idempotency_records:
    'the Agent API records a refusal under its Idempotency-Key, so the identical retry is answered the same',
  hmac_seen_signatures: 'a valid signature is remembered (replay protection) before the body is judged',
  tool_uses: 'Agent API/MCP use counts, written after the answer',
  worker_heartbeats: 'written by workers on a timer',
  agent_admission_windows: "the Agent API's shared admission limit: leases counted per principal, flushed on a timer",
};

/** Tables whose rows count only when they hold something (row filter and reason). */
export const ROW_FILTERS: Record<string, [string, string]> = {
  tenant_message_counts: [
    'messages > 0',
    "a send creates this month's counter row at 0 as a lock anchor before its checks (the same as no row)",
  ],
};

export type Fingerprint = Map<string, string>;

const snapshotOf = async (client: pg.Client) =>
  (await client.query<{ s: string }>('select pg_current_snapshot()::text as s')).rows[0]!.s;

/**
 * Scanning every table is the cost of a fingerprint; most refused requests
 * write nothing at all. No write commits without a transaction id, so while
 * the snapshot (xmin:xmax:in-progress ids) is the same as at the last scan,
 * the last fingerprint still holds and the scan is skipped.
 */
function cachedBySnapshot(client: pg.Client, scan: () => Promise<Fingerprint>): () => Promise<Fingerprint> {
  let last: { snapshot: string; fingerprint: Fingerprint } | null = null;
  return async () => {
    const snapshot = await snapshotOf(client);
    if (last?.snapshot === snapshot) return last.fingerprint;
    const fingerprint = await scan();
    // Taken before the scan: a write committed during the scan forces the next take to scan again.
    last = { snapshot, fingerprint };
    return fingerprint;
  };
}

export async function fingerprinter(t: Test, databaseUrl: string) {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  t.teardown(() => client.end());
  const { rows } = await client.query<{ schema: string; name: string }>(
    `select table_schema as schema, table_name as name from information_schema.tables
     where table_type = 'BASE TABLE' and table_schema in ('public', 'graphile_worker') order by 1, 2`,
  );
  const tables = rows.filter((r) => !(r.schema === 'public' && r.name in BOOKKEEPING_TABLES));
  const query = tables
    .map(
      (r) =>
        `select '${r.schema}.${r.name}' as t, count(*)::text || ':' || coalesce(sum(hashtext(xmin::text)::bigint), 0)::text as f from "${r.schema}"."${r.name}"${r.schema === 'public' && ROW_FILTERS[r.name] ? ` where ${ROW_FILTERS[r.name]![0]}` : ''}`,
    )
    .join(' union all ');

  const take = cachedBySnapshot(
    client,
    async () => new Map((await client.query<{ t: string; f: string }>(query)).rows.map((r) => [r.t, r.f])),
  );
  /** Tables whose fingerprint differs. */
  const changed = (a: Fingerprint, b: Fingerprint) => [...b.keys()].filter((k) => a.get(k) !== b.get(k));
  return { take, changed, tableCount: tables.length };
}

/** The same, for one tenant's rows only (tables with a tenant_id column, its tenants row, its people's users rows). */
export async function tenantFingerprinter(t: Test, databaseUrl: string, tenantId: string, userIds: string[]) {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  t.teardown(() => client.end());
  const { rows } = await client.query<{ name: string }>(
    `select table_name as name from information_schema.columns where table_schema = 'public' and column_name = 'tenant_id' order by 1`,
  );
  const tables = rows.filter((r) => !(r.name in BOOKKEEPING_TABLES));
  const part = (name: string, where: string) =>
    `select '${name}' as t, count(*)::text || ':' || coalesce(sum(hashtext(xmin::text)::bigint), 0)::text as f from "${name}" where ${where}`;
  const query = [
    ...tables.map((r) => part(r.name, `tenant_id = $1${ROW_FILTERS[r.name] ? ` and ${ROW_FILTERS[r.name]![0]}` : ''}`)),
    part('tenants', 'id = $1'),
    part('users', 'id = any($2::uuid[])'),
  ].join(' union all ');
  const take = cachedBySnapshot(
    client,
    async () =>
      new Map((await client.query<{ t: string; f: string }>(query, [tenantId, userIds])).rows.map((r) => [r.t, r.f])),
  );
  const changed = (a: Fingerprint, b: Fingerprint) => [...b.keys()].filter((k) => a.get(k) !== b.get(k));
  return { take, changed };
}
