// The soak's verdict on its processes' logs: an error (level 50 or above)
// is something nobody expected, as every fault the soak injects has a
// handled path (a warning at most). A defect often shows here before any
// other invariant breaks: a stale attempt's failure reaching Graphile
// Worker, for one, logs an error and changes no row.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import type { Invariant } from './invariants.ts';

export function logInvariant(logsDir: string): Invariant {
  const violations: string[] = [];
  let lines = 0;
  for (const file of readdirSync(logsDir).sort()) {
    for (const line of readFileSync(path.join(logsDir, file), 'utf8').split('\n')) {
      if (!line.startsWith('{')) continue;
      lines++;
      let entry: { level?: number; msg?: string; err?: { type?: string; message?: string; code?: string } };
      try {
        entry = JSON.parse(line) as typeof entry;
      } catch {
        continue;
      }
      if ((entry.level ?? 0) < 50) continue;
      // The error's own words travel with the message: a CI run's logs are gone once it ends.
      const err = entry.err
        ? ` (${[entry.err.type, entry.err.code, entry.err.message].filter(Boolean).join(': ')})`
        : '';
      violations.push(`${file}: ${`${String(entry.msg)}${err}`.split('\n')[0]!.slice(0, 400)}`);
    }
  }
  return { name: 'no process logged an error', checked: lines, violations };
}
