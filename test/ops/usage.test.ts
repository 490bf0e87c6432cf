// Every command a person runs prints its usage with --help (exit 0) and on a
// bad argument says what is wrong, then the usage (exit 2). The usage names
// the command as it was started: `npm run x` through npm, the node command
// when node runs the file itself (compiled in production: `node
// dist/ops/accounts.js`). Nothing here needs a database: the usage is
// settled before anything starts.
import { spawn } from 'node:child_process';
import t from 'tap';
import { entryArgs, runRoot, sourceRoot } from '../helpers/paths.ts';
import { spawnEntry } from '../helpers/worker.ts';

const entries = [
  'ops/start.ts',
  'api/server.ts',
  'workers/runner.ts',
  'ops/migrate.ts',
  'ops/db.ts',
  'ops/bench/index.ts',
  'ops/soak/index.ts',
  'ops/accounts.ts',
  'ops/licenses.ts',
  'ops/tenant-plan.ts',
  'ops/tenant-suspend.ts',
  'ops/rotate-keys.ts',
  'ops/login-unlock.ts',
  'ops/runner.ts',
];

/** How a test runs the entry with node (spawnEntry, from runRoot): `node ops/accounts.js`. */
const nodeCommand = (entry: string) =>
  `node ${entryArgs(entry)
    .map((arg) => arg.replace(`${runRoot}/`, ''))
    .join(' ')}`;

t.test('--help prints the usage, naming the node command that ran it, and exits 0', async (t) => {
  await Promise.all(
    entries.map(async (entry) => {
      const p = spawnEntry(t, entry, {}, { args: ['--help'] });
      t.equal(await p.exited, 0, `${entry} --help`);
      const command = nodeCommand(entry);
      t.ok(p.output().startsWith(`usage: ${command}`), `${entry} names ${command}: ${p.output().slice(0, 60)}`);
      t.notMatch(p.output(), /npm (run|start)/, `${entry}: no npm script where npm did not start it`);
    }),
  );
});

t.test('the other names follow: operator:create is accounts with --operator', async (t) => {
  const p = spawnEntry(t, 'ops/accounts.ts', {}, { args: ['--help'] });
  t.equal(await p.exited, 0);
  t.match(p.output(), `\n       ${nodeCommand('ops/accounts.ts')} --operator --email <e-mail>\n`);
});

t.test('started by npm, the usage names the npm script', async (t) => {
  const child = spawn('/usr/bin/env', ['-u', 'NODE_OPTIONS', 'npm', 'run', '-s', 'login:unlock', '--', '--help'], {
    cwd: sourceRoot,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (d) => (output += d));
  child.stderr.on('data', (d) => (output += d));
  t.equal(await new Promise((resolve) => child.on('close', resolve)), 0, output);
  t.ok(output.startsWith('usage: npm run login:unlock -- --email <e-mail>\n'), output);
});

t.test('an unknown option is refused with the usage, exit 2', async (t) => {
  await Promise.all(
    entries.map(async (entry) => {
      const p = spawnEntry(t, entry, {}, { args: ['--colour', 'blue'] });
      t.equal(await p.exited, 2, `${entry} --colour`);
      t.match(p.output(), /^error: Unknown option '--colour'/, entry);
      t.match(p.output(), `usage: ${nodeCommand(entry)}`, entry);
    }),
  );
});
