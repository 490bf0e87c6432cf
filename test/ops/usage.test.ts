// Every command a person runs prints its usage with --help (exit 0) and on a
// bad argument says what is wrong, then the usage (exit 2). Nothing here
// needs a database: the usage is settled before anything starts.
import t from 'tap';
import { spawnEntry } from '../helpers/worker.ts';

const commands = {
  'ops/start.ts': 'npm start',
  'api/server.ts': 'npm run start:api',
  'workers/runner.ts': 'npm run start:worker',
  'ops/migrate.ts': 'npm run migrate',
  'ops/db.ts': 'npm run db',
  'ops/bench/index.ts': 'npm run bench',
  'ops/soak/index.ts': 'npm run soak',
  'ops/accounts.ts': 'npm run user:create',
  'ops/licenses.ts': 'npm run license:create',
  'ops/tenant-plan.ts': 'npm run tenant:plan',
  'ops/tenant-suspend.ts': 'npm run tenant:suspend',
  'ops/rotate-keys.ts': 'npm run keys:rotate',
  'ops/login-unlock.ts': 'npm run login:unlock',
  'ops/runner.ts': 'npm run runner',
};

t.test('--help prints the usage and exits 0', async (t) => {
  await Promise.all(
    Object.entries(commands).map(async ([entry, command]) => {
      const p = spawnEntry(t, entry, {}, { args: ['--help'] });
      t.equal(await p.exited, 0, `${entry} --help`);
      t.ok(p.output().startsWith(`usage: ${command}`), `${entry} names its command: ${p.output().slice(0, 60)}`);
    }),
  );
});

t.test('an unknown option is refused with the usage, exit 2', async (t) => {
  await Promise.all(
    Object.entries(commands).map(async ([entry, command]) => {
      const p = spawnEntry(t, entry, {}, { args: ['--colour', 'blue'] });
      t.equal(await p.exited, 2, `${entry} --colour`);
      t.match(p.output(), /^error: Unknown option '--colour'/, entry);
      t.match(p.output(), `usage: ${command}`, entry);
    }),
  );
});
