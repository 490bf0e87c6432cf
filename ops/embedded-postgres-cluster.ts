// Where the embedded cluster lives and how it is created. One rule for
// `npm start`, the ops commands and tests: the cluster is exactly the
// directory asked for (DATA_DIR/pg), never a second one elsewhere.
//
// Run as root, PostgreSQL refuses root and runs as the system user
// `postgres`, which often cannot pass through the directories above the
// checkout (/root, a mktemp directory). Rather than opening those up, we let
// the child process enter the cluster while it is still root (spawn's cwd is
// applied before the uid switch) and name the data directory /proc/self/cwd:
// PostgreSQL then never resolves the path through the closed directories.
// Nothing above the cluster changes mode; the cluster itself belongs to
// `postgres` with mode 0700, as PostgreSQL requires.
import { execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Logger } from 'pino';
import { SHARED_ROOT } from './embedded-postgres-staging.ts';

/** A cluster directory that cannot be used as it is; the message names the path and the fix. */
export class ClusterDirectoryError extends Error {
  override name = 'ClusterDirectoryError';
}

export const runsAsRoot = () => process.getuid?.() === 0;

/** The -D argument and working directory a PostgreSQL process of this cluster gets. */
export function dataDirArgs(directory: string): { dataArg: string; cwd: string | undefined } {
  return runsAsRoot() ? { dataArg: '/proc/self/cwd', cwd: directory } : { dataArg: directory, cwd: undefined };
}

type Ids = { uid: number; gid: number };

/** The postgres system user's ids, creating the user on first use (root only). */
export function postgresUserIds(): Ids | Record<string, never> {
  if (!runsAsRoot()) return {};
  const id = (flag: string) =>
    Number.parseInt(
      execFileSync('id', [flag, 'postgres'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim(),
      10,
    );
  try {
    return { uid: id('-u'), gid: id('-g') };
  } catch {
    execFileSync(
      'useradd',
      ['--system', '--user-group', '--no-create-home', '--shell', '/usr/sbin/nologin', 'postgres'],
      { stdio: 'ignore' },
    );
    return { uid: id('-u'), gid: id('-g') };
  }
}

/** Where a cluster of `requested` may be kept outside DATA_DIR, in the shared place (brought back by adoptRelocatedCluster). */
export function legacyRelocatedDirectory(requested: string): string {
  const key = createHash('sha256').update(requested).digest('hex').slice(0, 16);
  return path.join(SHARED_ROOT, 'embedded-pg', key);
}

/**
 * Brings a cluster found in the shared place back into DATA_DIR/pg, so
 * DATA_DIR keeps its data and has one cluster. Moving a directory on one file system is atomic;
 * across file systems the operator moves it (the message says how).
 */
function adoptRelocatedCluster(directory: string, logger?: Logger): void {
  const legacy = legacyRelocatedDirectory(directory);
  if (!existsSync(path.join(legacy, 'PG_VERSION')) || existsSync(path.join(directory, 'PG_VERSION'))) return;
  if (existsSync(path.join(legacy, 'postmaster.pid'))) {
    throw new ClusterDirectoryError(
      `embedded postgres: the cluster of ${directory} is still at ${legacy} and looks running; stop the process using it, then start again`,
    );
  }
  if (existsSync(directory) && readdirSync(directory).length === 0) rmSync(directory, { recursive: true });
  mkdirSync(path.dirname(directory), { recursive: true });
  try {
    renameSync(legacy, directory);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EXDEV') throw error;
    throw new ClusterDirectoryError(
      `embedded postgres: the cluster of ${directory} is at ${legacy} (kept there by an earlier version). Move it back with: mv ${legacy} ${directory}`,
    );
  }
  logger?.warn(
    { from: legacy, to: directory },
    'embedded postgres: moved the cluster an earlier version kept in a shared place back into DATA_DIR',
  );
}

// What initdb writes into a cluster directory; anything else there is not ours.
const CLUSTER_ENTRY =
  /^(PG_VERSION|base|global|pg_[a-z_]+|postgresql(\.auto)?\.conf|pg_(hba|ident)\.conf|postmaster\.(opts|pid))$/;

/**
 * initdb that was interrupted leaves a directory without PG_VERSION: nothing
 * usable, so it starts over. A non-empty directory holding anything initdb
 * would not write is someone's data: refuse rather than delete it.
 */
function removeInterruptedInitdb(directory: string, logger?: Logger): void {
  if (!existsSync(directory) || existsSync(path.join(directory, 'PG_VERSION'))) return;
  if (!statSync(directory).isDirectory())
    throw new ClusterDirectoryError(
      `embedded postgres: ${directory} is not a directory; move it away or set DATA_DIR elsewhere`,
    );
  const entries = readdirSync(directory);
  if (entries.length === 0) return;
  const foreign = entries.filter((name) => !CLUSTER_ENTRY.test(name));
  if (foreign.length > 0) {
    throw new ClusterDirectoryError(
      `embedded postgres: ${directory} is not empty and holds no PostgreSQL cluster (${foreign.slice(0, 3).join(', ')}); move it away or set DATA_DIR elsewhere`,
    );
  }
  logger?.warn({ directory }, 'embedded postgres: removing a half-initialised data directory');
  rmSync(directory, { recursive: true, force: true });
}

/**
 * Makes the cluster directory usable as it is, or says what to do. Root: the
 * directory is created for `postgres`; an existing one must already belong
 * to it (we never take over a directory someone else owns).
 */
export function prepareClusterDirectory(directory: string, logger?: Logger): Ids | Record<string, never> {
  if (runsAsRoot()) adoptRelocatedCluster(directory, logger);
  removeInterruptedInitdb(directory, logger);
  if (!runsAsRoot()) return {};
  const ids = postgresUserIds();
  if (!('uid' in ids)) return ids;
  if (!existsSync(directory)) {
    mkdirSync(path.dirname(directory), { recursive: true });
    mkdirSync(directory, { mode: 0o700 });
    chownSync(directory, ids.uid, ids.gid);
    return ids;
  }
  const stat = statSync(directory);
  if (!stat.isDirectory())
    throw new ClusterDirectoryError(
      `embedded postgres: ${directory} is not a directory; move it away or set DATA_DIR elsewhere`,
    );
  if (stat.uid !== ids.uid) {
    const empty = readdirSync(directory).length === 0;
    if (empty && stat.uid === 0) {
      // An empty directory we (root) created: hand it to postgres.
      chownSync(directory, ids.uid, ids.gid);
      chmodSync(directory, 0o700);
      return ids;
    }
    throw new ClusterDirectoryError(
      `embedded postgres: ${directory} belongs to uid ${stat.uid}, but the embedded PostgreSQL runs as the system user postgres (uid ${ids.uid}) when started as root. ` +
        `Start as the owner of that directory, or give it to postgres: chown -R postgres:postgres ${directory}`,
    );
  }
  return ids;
}

/** initdb for a new cluster, as the user that will run it, with a password file only that user can read. */
export async function initialiseCluster(
  initdb: string,
  directory: string,
  password: string,
  log: (message: string) => void,
): Promise<void> {
  const ids = postgresUserIds();
  const scratch = mkdtempSync(path.join(tmpdir(), 'platform-initdb-'));
  try {
    const passwordFile = path.join(scratch, 'password');
    writeFileSync(passwordFile, `${password}\n`, { mode: 0o600 });
    if ('uid' in ids) {
      chownSync(scratch, ids.uid, ids.gid);
      chownSync(passwordFile, ids.uid, ids.gid);
    }
    if (!runsAsRoot()) mkdirSync(directory, { recursive: true, mode: 0o700 });
    const { dataArg, cwd } = dataDirArgs(directory);
    const args = [
      `--pgdata=${dataArg}`,
      '--auth=scram-sha-256',
      '--username=postgres',
      `--pwfile=${passwordFile}`,
      '--encoding=UTF8',
      '--no-sync',
      '--lc-messages=C',
    ];
    await new Promise<void>((resolve, reject) => {
      const child = spawn(initdb, args, {
        cwd,
        env: { ...process.env, LC_MESSAGES: 'C' },
        stdio: ['ignore', 'pipe', 'pipe'],
        ...ids,
      });
      let output = '';
      const collect = (chunk: Buffer) => {
        const text = chunk.toString('utf8');
        output += text;
        log(text);
      };
      child.stdout.on('data', collect);
      child.stderr.on('data', collect);
      child.once('error', reject);
      child.once('close', (code, signal) =>
        code === 0
          ? resolve()
          : reject(
              new ClusterDirectoryError(
                `embedded postgres: initdb failed for ${directory} (${signal ?? `code ${code}`}): ${output.trim().split('\n').slice(-5).join('\n')}`,
              ),
            ),
      );
    });
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}
