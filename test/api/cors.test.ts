// CORS: off unless CORS_ORIGINS lists origins; then exactly those origins get
// the headers (preflight and real requests), any other none, and /mcp still
// refuses browser origins other than its own.
import t from 'tap';
import { buildTestApp } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/db.ts';

const databaseUrl = await createTestDatabase(t);
const ALLOWED = 'https://app.example.com';
const OTHER = 'https://evil.example.net';
const preflight = (origin: string) => ({
  method: 'OPTIONS' as const,
  url: '/api/jobs/6f1c1a4e-8d39-4b8e-9a53-2a3f1f1e0c55/cancel',
  headers: {
    origin,
    'access-control-request-method': 'POST',
    'access-control-request-headers': 'authorization,content-type,x-tenant-id',
  },
});

t.test('off by default: no CORS headers at all', async (t) => {
  const { app } = await buildTestApp(t, databaseUrl);
  const pre = await app.inject(preflight(ALLOWED));
  t.notOk(pre.headers['access-control-allow-origin']);
  t.notOk(pre.headers['access-control-allow-methods']);
  const res = await app.inject({ url: '/healthz', headers: { origin: ALLOWED } });
  t.equal(res.statusCode, 200);
  t.notOk(res.headers['access-control-allow-origin']);
  t.notOk(res.headers['access-control-expose-headers']);
});

t.test('with CORS_ORIGINS: exactly the listed origins', async (t) => {
  const { app } = await buildTestApp(t, databaseUrl, { CORS_ORIGINS: `${ALLOWED}, https://admin.example.com` });

  const pre = await app.inject(preflight(ALLOWED));
  t.equal(pre.statusCode, 204);
  t.equal(pre.headers['access-control-allow-origin'], ALLOWED);
  t.notOk(pre.headers['access-control-allow-credentials'], 'no credentials');
  t.same(String(pre.headers['access-control-allow-methods']).split(/\s*,\s*/), [
    'GET',
    'POST',
    'PUT',
    'PATCH',
    'DELETE',
  ]);
  const allowedHeaders = String(pre.headers['access-control-allow-headers']).split(/\s*,\s*/);
  for (const h of ['authorization', 'content-type', 'x-tenant-id', 'idempotency-key', 'mcp-protocol-version'])
    t.ok(allowedHeaders.includes(h), `allows ${h}`);
  t.match(pre.headers.vary, /Origin/);

  const res = await app.inject({ url: '/healthz', headers: { origin: ALLOWED } });
  t.equal(res.statusCode, 200);
  t.equal(res.headers['access-control-allow-origin'], ALLOWED);
  t.same(String(res.headers['access-control-expose-headers']).split(/\s*,\s*/), ['x-request-id', 'retry-after']);
  t.equal(
    (await app.inject({ url: '/healthz', headers: { origin: 'https://admin.example.com' } })).headers[
      'access-control-allow-origin'
    ],
    'https://admin.example.com',
  );

  const otherPre = await app.inject(preflight(OTHER));
  t.notOk(otherPre.headers['access-control-allow-origin'], 'an unlisted origin gets no allow-origin on preflight');
  t.notOk(otherPre.headers['access-control-allow-methods']);
  const other = await app.inject({ url: '/healthz', headers: { origin: OTHER } });
  t.equal(other.statusCode, 200, "the request itself is served (CORS is the browser's to enforce)");
  t.notOk(other.headers['access-control-allow-origin'], 'nor on a real request');
  const suffix = await app.inject({ url: '/healthz', headers: { origin: `${ALLOWED}.evil.net` } });
  t.notOk(suffix.headers['access-control-allow-origin'], 'exact match, not a prefix');
  const noOrigin = await app.inject('/healthz');
  t.notOk(noOrigin.headers['access-control-allow-origin'], 'no Origin, no CORS headers');
});

t.test('/mcp still refuses a browser origin other than its own, listed for CORS or not', async (t) => {
  const { app, config } = await buildTestApp(t, databaseUrl, { CORS_ORIGINS: ALLOWED });
  const body = { jsonrpc: '2.0', id: 1, method: 'tools/list' };
  const res = await app.inject({
    method: 'POST',
    url: '/mcp',
    headers: { origin: ALLOWED, 'content-type': 'application/json' },
    payload: body,
  });
  t.equal(res.statusCode, 403);
  t.match(res.json(), { code: 'origin_not_allowed' });
  const own = await app.inject({
    method: 'POST',
    url: '/mcp',
    headers: { origin: new URL(config.baseUrl).origin, 'content-type': 'application/json' },
    payload: body,
  });
  t.not(own.statusCode, 403, 'its own origin passes the origin check (then needs a token)');
});
