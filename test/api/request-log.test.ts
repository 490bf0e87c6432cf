// Each request's one log line says what happened: a refused request carries
// its error code, a request no route matched its path (never the query
// string), and every JSON line parses with unique keys.
import t from 'tap';
import { buildTestApp } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/db.ts';

const databaseUrl = await createTestDatabase(t);
const api = await buildTestApp(t, databaseUrl, { LOG_LEVEL: 'info' });
const { app } = api;

/** The JSON lines logged since `from` (a character offset into the log). */
const linesSince = (from: number) =>
  api
    .logs()
    .slice(from)
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as Record<string, unknown>);

t.test('a refused request logs its error code', async (t) => {
  const from = api.logs().length;
  const res = await app.inject({
    method: 'POST',
    url: '/api/auth/login',
    payload: { email: 'nobody@example.test', password: 'wrong one' },
    remoteAddress: '10.5.0.1',
  });
  t.equal(res.statusCode, 401);
  const line = linesSince(from).find((l) => l.route === '/api/auth/login');
  t.match(line, {
    method: 'POST',
    route: '/api/auth/login',
    status: 401,
    error: 'invalid_credentials',
    msg: /^POST \/api\/auth\/login 401 invalid_credentials [\d.]+ ms$/,
  });
  const ok = await app.inject('/healthz');
  t.equal(ok.statusCode, 200);
});

t.test('an unmatched route logs its path without the query string', async (t) => {
  const from = api.logs().length;
  await app.inject('/api/no-such-thing/here?token=secret-value');
  const line = linesSince(from).find((l) => l.route === 'unmatched');
  t.match(line, {
    route: 'unmatched',
    path: '/api/no-such-thing/here',
    status: 404,
    error: 'not_found',
    msg: /^GET unmatched \/api\/no-such-thing\/here 404 not_found [\d.]+ ms$/,
  });
  t.notMatch(api.logs().slice(from), /secret-value/, 'the query string is not logged');
});

t.test('every line is one JSON object with one pid', async (t) => {
  const lines = api.logs().split('\n').filter(Boolean);
  t.ok(lines.length > 0);
  for (const raw of lines) {
    t.doesNotThrow(() => JSON.parse(raw), raw.slice(0, 80));
    t.ok((raw.match(/"pid":/g) ?? []).length <= 1, `one pid: ${raw.slice(0, 80)}`);
  }
});
