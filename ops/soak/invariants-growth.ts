// The soak's verdict on growth: each process's resident memory and each
// table's size after warm-up. Both are judged on runs of 5 minutes or more
// (a shorter run prints them only); retention deletes rows after days, so
// within a soak "bounded" means vacuum keeps up: a table whose rows stay
// level does not grow, and a growing table's bytes per row stay level.
import { z } from 'zod';
import { sql, type DatabasePool } from '../../core/db/pool.ts';
import type { Invariant } from './invariants.ts';

export type MemorySample = { at: number; mb: Record<string, number> };
export type TableSample = { at: number; tables: Map<string, { mb: number; rows: number }> };

/** Resident memory may grow at most this much per 10 minutes after warm-up. */
export const MEMORY_GROWTH_BOUND_MB_PER_10_MIN = 64;
/** A table whose live rows stay level may grow at most this much per 10 minutes (dead rows vacuum does not reuse). */
export const LEVEL_TABLE_GROWTH_BOUND_MB_PER_10_MIN = 16;
/** A growing table's bytes per live row may at most double (index and heap bloat). */
const BYTES_PER_ROW_GROWTH_BOUND = 2;
const JUDGED_AFTER_MINUTES = 5;

/** Each process's resident memory once a minute (MiB), to read a growth's shape: a plateau or a slope. */
export function memoryByMinute(samples: MemorySample[]): string[] {
  if (samples.length === 0) return [];
  const start = samples[0]!.at;
  const byName = new Map<string, Map<number, number>>();
  for (const s of samples) {
    const minute = Math.floor((s.at - start) / 60_000);
    for (const [name, mb] of Object.entries(s.mb)) {
      const minutes = byName.get(name) ?? new Map<number, number>();
      if (!minutes.has(minute)) minutes.set(minute, mb);
      byName.set(name, minutes);
    }
  }
  return [...byName].map(
    ([name, minutes]) => `${name}: ${[...minutes.values()].map((mb) => Math.round(mb)).join(' ')}`,
  );
}

export async function sampleTables(db: DatabasePool): Promise<TableSample> {
  const rows = await db.any(sql.type(z.object({ name: z.string(), mb: z.number(), rows: z.number() }))`
    select relname as name, pg_total_relation_size(relid)::float8 / 1048576 as mb, n_live_tup::float8 as rows from pg_stat_user_tables`);
  return { at: Date.now(), tables: new Map(rows.map((r) => [r.name, { mb: r.mb, rows: r.rows }])) };
}

export function tableGrowthInvariant(first: TableSample, last: TableSample): Invariant {
  const minutes = (last.at - first.at) / 60_000;
  const judged = minutes >= JUDGED_AFTER_MINUTES;
  const violations: string[] = [];
  const shown: Array<[number, string]> = [];
  let checked = 0;
  for (const [name, end] of last.tables) {
    const start = first.tables.get(name);
    if (!start) continue;
    const per10 = ((end.mb - start.mb) / Math.max(minutes, 1e-9)) * 10;
    const level = Math.abs(end.rows - start.rows) <= Math.max(1000, start.rows * 0.1);
    const perRow = (s: { mb: number; rows: number }) => (s.rows > 0 ? (s.mb * 1048576) / s.rows : 0);
    shown.push([
      end.mb - start.mb,
      `${name} ${start.mb.toFixed(1)}→${end.mb.toFixed(1)} MiB (${Math.round(start.rows)}→${Math.round(end.rows)} rows)`,
    ]);
    // Small tables are noise (a page or two of free space); the judged ones are 1 MiB or more.
    if (!judged || end.mb < 1) continue;
    checked++;
    if (level && per10 > LEVEL_TABLE_GROWTH_BOUND_MB_PER_10_MIN)
      violations.push(`${name}: rows level, size +${per10.toFixed(1)} MiB per 10 min`);
    if (!level && start.rows >= 1000 && perRow(end) > perRow(start) * BYTES_PER_ROW_GROWTH_BOUND) {
      violations.push(`${name}: ${perRow(start).toFixed(0)} → ${perRow(end).toFixed(0)} bytes per live row`);
    }
  }
  return {
    name: `tables stay bounded after warm-up (level ones < ${LEVEL_TABLE_GROWTH_BOUND_MB_PER_10_MIN} MiB per 10 min, growing ones' bytes per row < ${BYTES_PER_ROW_GROWTH_BOUND}x)`,
    checked,
    violations,
    note: `${judged ? '' : `judged on runs of ${JUDGED_AFTER_MINUTES} min or more; `}grew most: ${shown
      .sort((a, b) => b[0] - a[0])
      .slice(0, 4)
      .map(([, s]) => s)
      .join(', ')}`,
  };
}

/**
 * Growth of each process's resident memory after its warm-up, per 10
 * minutes; judged on runs of 5 minutes or more. The warm-up counts from the
 * process's own first sample: one restarted by a fault starts small and
 * fills its caches like the others did at the start.
 */
export function memoryInvariant(samples: MemorySample[], warmUpMs: number): Invariant {
  const names = new Set(samples.flatMap((s) => Object.keys(s.mb)));
  const violations: string[] = [];
  const growths: string[] = [];
  let judged = 0;
  for (const name of names) {
    const mine = samples.filter((s) => s.mb[name] !== undefined);
    const own = mine.filter((s) => s.at >= mine[0]!.at + warmUpMs);
    if (own.length < 2) continue;
    const first = own[0]!;
    const last = own.at(-1)!;
    const minutes = (last.at - first.at) / 60_000;
    const grew = last.mb[name]! - first.mb[name]!;
    growths.push(`${name} ${first.mb[name]!.toFixed(0)}→${last.mb[name]!.toFixed(0)} MiB`);
    if (minutes < JUDGED_AFTER_MINUTES) continue;
    judged++;
    const per10 = (grew / minutes) * 10;
    if (per10 > MEMORY_GROWTH_BOUND_MB_PER_10_MIN) violations.push(`${name}: +${per10.toFixed(1)} MiB per 10 min`);
  }
  return {
    name: `resident memory grows < ${MEMORY_GROWTH_BOUND_MB_PER_10_MIN} MiB per 10 min after warm-up`,
    checked: judged,
    violations,
    note: `${judged ? '' : 'judged on runs of 5 min or more; '}${growths.join(', ')}`,
  };
}
