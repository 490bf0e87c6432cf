// Every error leaves in its surface's shape, and nothing internal leaks.
import t from 'tap';
import { buildTestApp } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { createMember } from '../helpers/fixtures.ts';

const databaseUrl = await createTestDatabase(t);
const { app, db } = await buildTestApp(t, databaseUrl);
const member = await createMember(db);

t.test('platform errors are {error, status} with a message', async (t) => {
  const missing = await app.inject('/api/nothing-here');
  t.equal(missing.statusCode, 404);
  t.match(missing.json(), { error: 'not_found', status: 404, message: /No route for GET \/api\/nothing-here/ });

  const noToken = await app.inject('/api/jobs/6f1c1a4e-8d39-4b8e-9a53-2a3f1f1e0c55');
  t.equal(noToken.statusCode, 401);
  t.match(noToken.json(), { error: 'unauthorized', status: 401 });
  t.equal(noToken.headers['www-authenticate'], 'Bearer');

  const badParam = await app.inject({ url: '/api/jobs/42', headers: { authorization: `Bearer ${member.token}` } });
  t.equal(badParam.statusCode, 400);
  t.same(badParam.json().details, [{ path: 'path.jobId', message: 'Invalid UUID' }]);
});

t.test('the request id is echoed, and a given one is kept when well-formed', async (t) => {
  const given = await app.inject({ url: '/healthz', headers: { 'x-request-id': 'trace-123' } });
  t.equal(given.headers['x-request-id'], 'trace-123');
  const minted = await app.inject({ url: '/healthz', headers: { 'x-request-id': 'bad id with spaces' } });
  t.match(minted.headers['x-request-id'], /^[0-9a-f-]{36}$/);
});

t.test('agent API errors carry a code, a message and the safe next action', async (t) => {
  const res = await app.inject('/api/agent/v1/unknown');
  t.equal(res.statusCode, 404);
  t.same(res.json(), {
    code: 'not_found',
    message: 'No route for GET /api/agent/v1/unknown',
    next_action: 'reread_list',
  });
});

t.test('identity provider errors are {code, message}', async (t) => {
  const res = await app.inject({ method: 'POST', url: '/oauth2/nothing' });
  t.equal(res.statusCode, 404);
  t.same(Object.keys(res.json()).sort(), ['code', 'message']);
});

t.test('malformed bodies get a 400 in the surface shape, never internals', async (t) => {
  const res = await app.inject({
    method: 'POST',
    url: '/api/nothing',
    headers: { 'content-type': 'application/json' },
    payload: '{"broken":',
  });
  t.ok([400, 404].includes(res.statusCode));
  const body = res.json();
  t.type(body.error, 'string');
  t.notMatch(res.body, /at .*\.(ts|js):\d+|SELECT|node_modules/i);
});

t.test('the OpenAPI document is generated and served as JSON and YAML', async (t) => {
  const json = await app.inject('/openapi.json');
  t.equal(json.statusCode, 200);
  const doc = json.json();
  t.equal(doc.openapi, '3.1.2');
  t.ok(doc.paths['/api/jobs/{jobId}']?.get?.operationId === 'getJob', 'routes carry their operationId');
  t.ok(doc.components.schemas.JobStatus, 'shared job-status schema is published');
  const yaml = await app.inject('/openapi.yaml');
  t.equal(yaml.statusCode, 200);
  t.match(yaml.headers['content-type'], /yaml/);
  t.match(yaml.body, /^openapi: 3\.1\.2$/m);
});

t.test('validation errors say in words which field and what is expected', async (t) => {
  const noTenant = await app.inject({
    method: 'POST',
    url: '/api/chat/send',
    headers: { authorization: `Bearer ${member.token}`, 'idempotency-key': 'words-0001' },
    payload: { sessionId: member.tenantId, message: 'hi' },
  });
  t.equal(noTenant.statusCode, 400);
  t.match(noTenant.json(), {
    error: 'invalid_request',
    message:
      /^The x-tenant-id header is missing \(expected a string\)\. It names the workspace to act in: a tenant id from GET \/api\/tenants\//,
    details: [{ path: 'header.x-tenant-id' }],
  });
  const badField = await app.inject({
    method: 'POST',
    url: '/api/auth/login',
    payload: { email: 'not-an-email', password: 'x' },
  });
  t.match(badField.json().message, /^The body field email is not valid: /);
});

t.test('a JSON body sent as curl -d sends it (form-encoded): 415 saying which type to send', async (t) => {
  const res = await app.inject({
    method: 'POST',
    url: '/api/auth/login',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    payload: '{"email":"a@example.test","password":"x"}',
  });
  t.equal(res.statusCode, 415);
  t.same(res.json(), {
    error: 'unsupported_media_type',
    status: 415,
    message:
      'Send the body as JSON with "content-type: application/json" (this request said application/x-www-form-urlencoded).',
  });
});

t.test('a known path with another method: 405 with Allow, in the surface shape', async (t) => {
  const init = await app.inject({ method: 'GET', url: '/api/chat/init' });
  t.equal(init.statusCode, 405);
  t.equal(init.headers.allow, 'POST');
  t.same(init.json(), { error: 'method_not_allowed', status: 405, message: '/api/chat/init takes POST, not GET.' });
  const job = await app.inject({ method: 'DELETE', url: '/api/chat/jobs/6f1c1a4e-8d39-4b8e-9a53-2a3f1f1e0c55' });
  t.equal(job.statusCode, 405, 'a path with a parameter');
  t.match(job.headers.allow, /\bGET\b/);
  const agent = await app.inject({ method: 'DELETE', url: '/api/agent/v1/me' });
  t.equal(agent.statusCode, 405);
  t.match(agent.json(), {
    code: 'invalid_request',
    next_action: 'fix_request',
    message: '/api/agent/v1/me takes GET, not DELETE.',
  });
});
