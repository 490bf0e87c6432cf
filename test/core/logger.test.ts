// No token or secret in a log line: the redaction list, and the api's own
// request logs with a credential in the headers.
import pino from 'pino';
import t from 'tap';
import { buildApp } from '../../api/app.ts';
import { createDatabasePool } from '../../core/db/pool.ts';
import { JobEventHub } from '../../core/jobs/events.ts';
import { GroupCommitter } from '../../core/jobs/group-commit.ts';
import { loggerOptions, safeDatabaseUrl } from '../../core/logger.ts';
import { testConfig, testLogger } from '../helpers/config.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { captureLog } from '../helpers/log-capture.ts';

const capture = captureLog;

t.test('credentials in log objects are redacted', async (t) => {
  const out = capture();
  const log = pino(loggerOptions('info', 'test'), out.stream);
  log.info(
    {
      req: { headers: { authorization: 'Bearer SECRET-1', cookie: 'sid=SECRET-2' } },
      body: { password: 'SECRET-3', refresh_token: 'SECRET-4', assertion: 'SECRET-5', apiKey: 'SECRET-6' },
    },
    'something happened',
  );
  t.notMatch(out.text(), /SECRET-\d/);
  t.match(out.text(), /\[redacted\]/);
  t.equal(safeDatabaseUrl('postgres://u:SECRET@h:5/db'), 'postgres://u:***@h:5/db');
  const dbError = Object.assign(new Error('row failed its schema'), {
    values: ['SECRET-7'],
    row: { password_hash: 'SECRET-8' },
  });
  log.error({ err: dbError }, 'query failed');
  t.notMatch(out.text(), /SECRET-[78]/, 'bound values and rows of database errors are dropped');
  t.match(out.text(), /row failed its schema/);
});

t.test('request logs never carry the bearer token', async (t) => {
  const databaseUrl = await createTestDatabase(t);
  const config = testConfig(databaseUrl, { LOG_LEVEL: 'trace' });
  const db = await createDatabasePool(databaseUrl, { maximumPoolSize: 2 });
  const hub = new JobEventHub(databaseUrl, db, testLogger());
  await hub.start();
  const out = capture();
  const app = await buildApp({ config, db, jobEvents: hub, jobs: new GroupCommitter(db) }, { logStream: out.stream });
  t.teardown(async () => {
    await app.close();
    await hub.stop();
    await db.end();
  });
  await app.inject({
    url: '/api/jobs/6f1c1a4e-8d39-4b8e-9a53-2a3f1f1e0c55',
    headers: { authorization: 'Bearer TOKEN-XYZ.abc.def' },
  });
  t.match(out.text(), /GET \/api\/jobs\/:jobId 401 /, 'requests are logged, one line each');
  t.match(out.text(), /"reqId"/, 'with their request id');
  t.notMatch(out.text(), /TOKEN-XYZ/);
});
