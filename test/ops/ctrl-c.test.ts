// Ctrl-C in a real terminal: `npm start` runs under a pseudo-terminal
// (util-linux `script`), and a ^C typed into it reaches the terminal's
// foreground process group (npm and node) as SIGINT, usually twice (the
// terminal's and npm's forwarded one). The running job must finish, the log
// must say so, and the embedded PostgreSQL, in a session of its own, must
// serve until our shutdown stops it last. Exit code 0.
import { execFileSync, spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { z } from 'zod';
import { createDatabasePool, sql } from '../../core/db/pool.ts';
import { freePort } from '../../ops/embedded-postgres.ts';
import { testEnv } from '../helpers/config.ts';
import { createMember, enqueue } from '../helpers/fixtures.ts';
import { sourceRoot } from '../helpers/paths.ts';
import { postmasterRunning } from '../helpers/postmaster.ts';
import { waitFor } from '../helpers/wait.ts';

const hasScript = (() => {
  try {
    execFileSync('script', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();
// npm start in the checkout, as a person would run it.
const root = sourceRoot;

t.test(
  'Ctrl-C on npm start in a terminal finishes the running job and exits 0',
  { skip: hasScript ? false : 'util-linux `script` is not installed (no pseudo-terminal to test with)' },
  async (t) => {
    const dataDir = mkdtempSync(path.join(process.env.TEST_SCRATCH_DIR!, 'ctrl-c-'));
    chmodSync(dataDir, 0o755);
    const port = await freePort();
    const env: Record<string, string> = {
      ...testEnv('unused', { DATA_DIR: dataDir, LOG_LEVEL: 'info', PORT: String(port), SHUTDOWN_TIMEOUT_MS: '20000' }),
    };
    delete env.DATABASE_URL;
    // `exec`: in a terminal the interactive shell runs npm as its job and ignores ^C itself.
    const child = spawn('script', ['-qfec', 'exec npm start', '/dev/null'], {
      cwd: root,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/root', ...env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    // 'close': after the exit and the last output read (the checks below read it).
    const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
    t.teardown(async () => {
      if (child.exitCode === null) {
        try {
          process.kill(-child.pid!, 'SIGKILL');
        } catch {
          child.kill('SIGKILL');
        }
      }
    });

    await waitFor('the platform to be ready', async () => (/platform ready/.test(output) ? true : null), 90_000);
    // Reach the embedded database as the ops commands do: its port and credentials are in DATA_DIR.
    const pgPort = readFileSync(path.join(dataDir, 'pg', 'postmaster.pid'), 'utf8').split('\n')[3];
    const postmasterPid = Number(readFileSync(path.join(dataDir, 'pg', 'postmaster.pid'), 'utf8').split('\n')[0]);
    const { password } = JSON.parse(readFileSync(path.join(dataDir, 'pg.credentials.json'), 'utf8')) as {
      password: string;
    };
    const db = await createDatabasePool(
      `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${pgPort}/platform`,
      { maximumPoolSize: 2 },
    );
    const member = await createMember(db);
    const jobId = await enqueue(db, {
      kind: 'diag.steps',
      tenantId: member.tenantId,
      input: { steps: 8, delayMs: 400 },
    });
    await waitFor('the job to run', async () =>
      (await db.oneFirst(sql.type(z.object({ status: z.string() }))`select status from jobs where id = ${jobId}`)) ===
      'running'
        ? true
        : null,
    );
    await db.end();

    child.stdin.write('\x03'); // the key press: the pty sends SIGINT to its foreground process group
    const code = await exited;
    t.equal(code, 0, 'exit code 0');
    if (code !== 0) t.comment(`exit code ${code}`);
    t.match(output, new RegExp(`"jobId":"${jobId}"[^\\n]*"job succeeded"`), 'the running job finished');
    t.notMatch(output, /forced exit|second signal/i, 'the doubled SIGINT counted as one');
    t.match(output, /platform stopped/);
    t.notMatch(
      output,
      /terminating connection due to administrator command|the database system is shutting down/,
      'PostgreSQL did not stop under the job',
    );
    let alive = true;
    try {
      process.kill(postmasterPid, 0);
    } catch {
      alive = false;
    }
    t.notOk(alive, 'and the database was stopped, last');
  },
);

t.test(
  'closing the terminal (SIGHUP) stops npm start and its embedded PostgreSQL',
  { skip: hasScript ? false : 'util-linux `script` is not installed (no pseudo-terminal to test with)' },
  async (t) => {
    const dataDir = mkdtempSync(path.join(process.env.TEST_SCRATCH_DIR!, 'hangup-'));
    chmodSync(dataDir, 0o755);
    const env: Record<string, string> = {
      ...testEnv('unused', { DATA_DIR: dataDir, LOG_LEVEL: 'info', PORT: String(await freePort()) }),
    };
    delete env.DATABASE_URL;
    const terminal = spawn('script', ['-qfec', 'exec npm start', '/dev/null'], {
      cwd: root,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/root', ...env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let output = '';
    terminal.stdout.on('data', (d) => (output += d));
    terminal.stderr.on('data', (d) => (output += d));
    t.teardown(() => {
      if (postmasterRunning(dataDir))
        process.kill(
          Number(readFileSync(path.join(dataDir, 'pg', 'postmaster.pid'), 'utf8').split('\n')[0]),
          'SIGKILL',
        );
    });
    await waitFor('the platform to be ready', async () => (/platform ready/.test(output) ? true : null), 90_000);
    t.ok(postmasterRunning(dataDir));
    const node = JSON.parse(readFileSync(path.join(dataDir, 'pg.owner'), 'utf8')) as { pid: number; command: string };
    t.equal(node.command, 'npm start');
    // Exited is gone or a zombie (reparented, it waits for whoever reaps orphans here).
    const alive = (pid: number) => {
      try {
        return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
      } catch {
        return false;
      }
    };

    // The terminal window goes away: its pseudo-terminal closes and the kernel hangs up on npm and node.
    terminal.kill('SIGKILL');
    await waitFor('npm start to exit', async () => (alive(node.pid) ? null : true), 60_000);
    t.notOk(postmasterRunning(dataDir), 'the embedded PostgreSQL was stopped');
    t.notOk(
      existsSync(path.join(dataDir, 'pg', 'postmaster.pid')),
      'stopped cleanly (no pid file left for the next start to recover)',
    );
    t.notOk(existsSync(path.join(dataDir, 'pg.owner')), 'and no owner left behind');
  },
);
