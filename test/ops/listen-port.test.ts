// The api's port is settled before anything starts (core/process/listen-port.ts):
// PORT=0 publishes the picked port in every generated URL, and a busy port
// stops npm start before the database or a worker starts.
import { createServer, type AddressInfo } from 'node:net';
import t from 'tap';
import { testEnv } from '../helpers/config.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { waitForOutput } from '../helpers/wait.ts';
import { spawnEntry } from '../helpers/worker.ts';

t.test('PORT=0: the real port is in every URL the service generates', async (t) => {
  const url = await createTestDatabase(t);
  const env = testEnv(url, { LOG_LEVEL: 'info', PORT: '0' }) as Record<string, string | undefined>;
  delete env.BASE_URL;
  delete env.AUTH_URL;
  const p = spawnEntry(t, 'api/server.ts', env as Record<string, string>);
  const [, port] = await waitForOutput(p, /"url":"http:\/\/127\.0\.0\.1:(\d+)"/);
  const base = `http://localhost:${port}`;
  t.match(p.output(), new RegExp(`"baseUrl":"${base}"`), 'BASE_URL names the port that was picked');
  for (const path of [
    '/docs/llms.txt',
    '/auth.md',
    '/arazzo.yaml',
    '/.well-known/oauth-protected-resource/api/agent',
  ]) {
    const text = await (await fetch(`http://127.0.0.1:${port}${path}`)).text();
    t.ok(text.includes(base), `${path} links to ${base}`);
    t.notOk(text.includes('localhost:0'), `${path} never names port 0`);
  }
  p.child.kill('SIGTERM');
  t.equal(await p.exited, 0);
});

t.test('a busy port stops npm start before the database or a worker starts, with a hint', async (t) => {
  const blocker = createServer();
  await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', () => resolve()));
  t.teardown(() => blocker.close());
  const port = (blocker.address() as AddressInfo).port;
  const url = await createTestDatabase(t);
  // start:api settles its port with the same function (core/process/listen-port.ts).
  const p = spawnEntry(t, 'ops/start.ts', testEnv(url, { LOG_LEVEL: 'info', PORT: String(port) }));
  t.equal(await p.exited, 1);
  t.match(p.output(), new RegExp(`port ${port} on 127\\.0\\.0\\.1 is already in use; stop what holds it, or set PORT`));
  t.notMatch(p.output(), /migrating|worker started|"embedded postgres/, 'nothing else started');
  t.notMatch(p.output(), /at .*\.ts:\d+/, 'no stack trace');
});
