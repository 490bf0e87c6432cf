// The reference runner (npm run runner): a refused token backs off and stops
// after --max-refusals refusals in a row with exit code 1 and a clear message.
import t from 'tap';
import { startTestServer } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { spawnEntry } from '../helpers/worker.ts';

t.test('a refused token backs off, then stops with exit code 1', async (t) => {
  const databaseUrl = await createTestDatabase(t);
  const api = await startTestServer(t, databaseUrl);
  const runner = spawnEntry(
    t,
    'ops/runner.ts',
    { LOG_LEVEL: 'info', RUNNER_TOKEN: 'rnr_not_a_real_token_000000000000' },
    {
      args: ['--url', api.url, '--interval', '100', '--max-refusals', '3'],
    },
  );
  t.equal(await runner.exited, 1, 'exit code 1');
  const output = runner.output();
  t.match(output, /refused 3 times in a row \(revoked or wrong\): enroll the runner again/);
  const waits = [...output.matchAll(/"retryInMs":(\d+)/g)].map((m) => Number(m[1]));
  t.same(waits, [100, 200], 'exponential backoff between refusals');
  t.notMatch(output, /rnr_not_a_real_token/, 'the token never reaches the log');
});
