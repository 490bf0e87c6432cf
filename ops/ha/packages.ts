// What the HA harness (cluster.ts) needs from Debian: etcd, Patroni, HAProxy
// and a PostgreSQL of 14 or newer. Tests skip, and .ci/run installs, by this.
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';

/** The Debian packages the harness needs that this machine lacks (empty: it can run). */
export function missingHaPackages(): string[] {
  const missing: string[] = [];
  const has = (cmd: string) => {
    try {
      execFileSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' });
      return true;
    } catch {
      return false;
    }
  };
  if (!has('etcd')) missing.push('etcd-server');
  if (!has('patroni')) missing.push('patroni');
  if (!has('haproxy')) missing.push('haproxy');
  if (!postgresBinDir()) missing.push('postgresql');
  return missing;
}

/** The newest Debian PostgreSQL (14 and newer) installed, if any. */
export function postgresBinDir(): string | null {
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return null;
  const versions = readdirSync(root)
    .map(Number)
    .filter((v) => v >= 14 && existsSync(path.join(root, String(v), 'bin', 'postgres')))
    .sort((a, b) => b - a);
  return versions.length ? path.join(root, String(versions[0]), 'bin') : null;
}
