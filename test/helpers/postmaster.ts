// Whether an embedded postmaster of a DATA_DIR is alive, found the way an
// operator would: by its data directory (its -D path, or its working
// directory when it was started as root with -D /proc/self/cwd).
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { processDataDirectory } from '../../core/db/local-cluster.ts';

/** A live postgres process whose data directory is DATA_DIR/pg (named by path, or by its cwd when run as root). */
export function postmasterRunning(dataDir: string): boolean {
  const cluster = path.join(dataDir, 'pg');
  return readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .some((pid) => {
      try {
        const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
        return cmdline[0]!.endsWith('postgres') && processDataDirectory(Number(pid), cmdline) === cluster;
      } catch {
        return false; // gone meanwhile
      }
    });
}
