// A page route's unhandled error (api/pages/errors.ts) answers as a page:
// PostgreSQL away is 503 with Retry-After and a warning (the soak found a
// sandbox page answering 500 during a restart), a 4xx stays a refusal, and
// anything else is 500 with the error logged.
import Fastify from 'fastify';
import t from 'tap';
import { DatabaseUnavailableError } from '../../../core/db/unavailable.ts';
import { setUpFormPages } from '../../../api/pages/session.ts';

const logged: Array<{ level: number; msg: string }> = [];
const app = Fastify({
  logger: {
    level: 'info',
    stream: { write: (line: string) => logged.push(JSON.parse(line) as { level: number; msg: string }) },
  },
});
t.teardown(() => app.close());
// biome-ignore lint/nursery/noMisusedPromises: register takes async plugins (FastifyPluginAsync); Biome picks its callback overload
await app.register(async (pages) => {
  await setUpFormPages(
    pages,
    (reply, status, title, text) => reply.code(status).type('text/html').send(`<h1>${title}</h1><p>${text}</p>`),
    'test page',
  );
  pages.get('/outage', async () => {
    throw new DatabaseUnavailableError('Connection terminated unexpectedly');
  });
  pages.get('/refused', async () => {
    throw Object.assign(new Error('no'), { statusCode: 409 });
  });
  pages.get('/bug', async () => {
    throw new Error('a bug');
  });
});

t.test('PostgreSQL away: 503 with Retry-After, logged as a warning', async (t) => {
  const res = await app.inject({ url: '/outage' });
  t.equal(res.statusCode, 503);
  t.equal(res.headers['retry-after'], '2');
  t.match(res.body, /Temporarily unavailable/);
  t.ok(
    logged.some((l) => l.level === 40 && /database unavailable; answered 503/.test(l.msg)),
    'a warning',
  );
  t.notOk(
    logged.some((l) => l.level >= 50),
    'no error logged',
  );
});

t.test('a 4xx stays a refusal; anything else is 500, logged as an error', async (t) => {
  t.equal((await app.inject({ url: '/refused' })).statusCode, 409);
  const bug = await app.inject({ url: '/bug' });
  t.equal(bug.statusCode, 500);
  t.match(bug.body, /Something went wrong/);
  t.ok(logged.some((l) => l.level === 50 && l.msg === 'test page failed'));
});
