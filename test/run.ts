// `npm test`: one PostgreSQL for the whole run, one migrated template
// database, then tap. Each test file clones the template (test/helpers/db.ts),
// so files run in parallel without seeing each other. The database is the
// embedded one in a temporary directory, or the server of DATABASE_URL when
// set. Test files run as JavaScript from a copy compiled while the database
// starts (test/build.ts). Whatever happens to the tests, the run removes
// what it made.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { migrate } from '../core/db/migrate.ts';
import { createLogger } from '../core/logger.ts';
import { startEmbeddedPostgres, type EmbeddedDatabase } from '../ops/embedded-postgres.ts';
import { buildForTests } from './build.ts';

const logger = createLogger(process.env.TEST_LOG_LEVEL ?? 'warn', 'test-run');
const scratch = mkdtempSync(path.join(tmpdir(), 'platform-test-'));
let embedded: EmbeddedDatabase | null = null;
const template = `tpl_${process.pid}_${randomBytes(3).toString('hex')}`;
let adminUrl = '';

async function cleanup() {
  if (adminUrl) {
    const client = new pg.Client({ connectionString: adminUrl });
    try {
      await client.connect();
      // Drop the template and any clone a crashed test file left behind.
      const { rows } = await client.query<{ datname: string }>(
        `select datname from pg_database where datname = $1 or datname like $2`,
        [template, `${template}_%`],
      );
      for (const { datname } of rows) await client.query(`drop database if exists "${datname}" with (force)`);
    } catch (error) {
      logger.warn({ err: error }, 'could not drop test databases');
    } finally {
      await client.end().catch(() => undefined);
    }
  }
  await embedded?.stop().catch((error) => logger.warn({ err: error }, 'could not stop embedded postgres'));
  rmSync(scratch, { recursive: true, force: true });
}

// `npm test -- test/x.test.ts` names checkout files; tap runs their compiled twins.
function tapArgs(args: string[], root: string): string[] {
  return args.map((arg) =>
    arg.endsWith('.ts') && !arg.startsWith('-') ? path.relative(root, path.resolve(arg)).replace(/\.ts$/, '.js') : arg,
  );
}

/**
 * `npm run lint` (formatting, lint rules, types) beside the tests of a full
 * run: its output is held and printed after tap's, and a finding fails the run.
 */
function startLint(root: string): Promise<{ code: number; output: string }> {
  const child = spawn('npm', ['run', '--silent', 'lint'], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr.on('data', (d: Buffer) => (output += d.toString()));
  return new Promise((resolve) => {
    child.on('error', (error) => resolve({ code: 1, output: `npm run lint could not start: ${error.message}` }));
    child.on('close', (c) => resolve({ code: c ?? 1, output }));
  });
}

async function main(): Promise<number> {
  const root = path.resolve(import.meta.dirname, '..');
  const fullRun = !process.argv.slice(2).some((arg) => arg.endsWith('.ts') || arg.endsWith('.js'));
  const lint = fullRun ? startLint(root) : null;
  const build = path.join(scratch, 'build');
  const built = buildForTests(root, build);
  built.catch(() => undefined); // awaited below; not unhandled while the database starts
  if (process.env.DATABASE_URL) {
    adminUrl = process.env.DATABASE_URL;
  } else {
    embedded = await startEmbeddedPostgres({
      directory: path.join(scratch, 'pg'),
      database: 'postgres',
      unsafeFast: true,
      logger,
    });
    adminUrl = embedded.adminUrl;
  }
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`create database "${template}"`);
  await admin.end();
  const templateUrl = new URL(adminUrl);
  templateUrl.pathname = `/${template}`;
  await migrate(templateUrl.toString(), logger);
  await built;

  const require = createRequire(import.meta.url);
  const tapBin = path.join(path.dirname(require.resolve('tap/package.json')), 'dist/esm/run.mjs');
  // On a terminal tap draws its own report; elsewhere (CI) we pass its TAP
  // output through and close with a plain "N passed, N failed" line.
  const interactive = Boolean(process.stdout.isTTY);
  const child = spawn(process.execPath, [tapBin, ...tapArgs(process.argv.slice(2), root)], {
    cwd: build,
    stdio: interactive ? 'inherit' : ['inherit', 'pipe', 'inherit'],
    env: {
      ...process.env,
      TEST_ADMIN_URL: adminUrl,
      TEST_TEMPLATE_DB: template,
      TEST_SCRATCH_DIR: scratch,
      TEST_SOURCE_ROOT: root,
      // Node's on-disk cache of compiled code: every test process after the
      // first loads the same ~1,800 modules with less CPU.
      NODE_COMPILE_CACHE: path.join(scratch, 'compile-cache'),
    },
  });
  let tail = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    process.stdout.write(chunk);
    tail = (tail + chunk.toString()).slice(-4096);
  });
  const forward = (signal: NodeJS.Signals) => child.kill(signal);
  process.on('SIGINT', forward);
  process.on('SIGTERM', forward);
  const code = await new Promise<number>((resolve) => child.on('close', (c, signal) => resolve(c ?? (signal ? 1 : 0))));
  const summary = /# \{ ([^}]*) \}/.exec(tail)?.[1];
  if (summary) {
    const count = (name: string) => Number(new RegExp(`${name}: (\\d+)`).exec(summary)?.[1] ?? 0);
    const skipped = count('skip') + count('todo');
    process.stdout.write(
      `\ntests: ${count('pass')} passed, ${count('fail')} failed${skipped ? `, ${skipped} skipped` : ''}\n`,
    );
  }
  if (lint !== null) {
    const linted = await lint;
    process.stdout.write(
      linted.code === 0
        ? 'lint: formatting, lint rules and types hold\n'
        : `\n${linted.output}\nlint: failed (npm run lint; npm run format rewrites the formatting)\n`,
    );
    if (linted.code !== 0) return code || 1;
  }
  return code;
}

let code = 1;
try {
  code = await main();
} catch (error) {
  process.stderr.write(`test run failed to start: ${(error as Error).message}\n`);
} finally {
  await cleanup();
}
process.exit(code);
