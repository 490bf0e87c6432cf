// Errors raised before any route runs leave in the surface's own shape:
// bad percent-encoding, over-long path parameters, HTTP that does not parse.
// A browser gets a page. (These once came back in Fastify's default shape.)
import { connect } from 'node:net';
import t from 'tap';
import { startTestServer } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/db.ts';

const databaseUrl = await createTestDatabase(t);
const { url } = await startTestServer(t, databaseUrl);
const { port } = new URL(url);

/** Sends bytes as they are and reads the whole answer (the server closes the socket). */
function raw(request: string): Promise<{ status: number; body: string; head: string }> {
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), '127.0.0.1', () => socket.write(request));
    let data = '';
    socket.on('data', (chunk) => (data += chunk));
    socket.on('error', reject);
    socket.on('close', () => {
      const [head, ...rest] = data.split('\r\n\r\n');
      resolve({
        status: Number(/^HTTP\/1\.1 (\d{3})/.exec(head ?? '')?.[1]),
        head: head ?? '',
        body: rest.join('\r\n\r\n'),
      });
    });
  });
}

t.test('bad percent-encoding: 400 in the platform, Agent API and identity shapes', async (t) => {
  const platform = await fetch(`${url}/api/companies/%zz`);
  t.equal(platform.status, 400);
  t.same(Object.keys(await platform.json()).sort(), ['error', 'message', 'status']);
  const agent = await fetch(`${url}/api/agent/v1/companies/%zz`);
  t.equal(agent.status, 400);
  t.match(await agent.json(), { code: 'invalid_request', next_action: 'fix_request' });
  const identity = await fetch(`${url}/agent/identity/claim/attempts/%zz`);
  t.equal(identity.status, 400);
  t.match(await identity.json(), { code: 'invalid_request', message: /percent-encoded/ });
});

t.test('an over-long path parameter: 414 in the surface shape', async (t) => {
  const res = await fetch(`${url}/agent/identity/claim/verify/${'a'.repeat(9000)}`);
  t.equal(res.status, 414);
  t.match(await res.json(), { code: 'invalid_request', message: 'A part of the URL path is too long.' });
});

t.test('a browser gets a page, also on the claim page', async (t) => {
  const res = await fetch(`${url}/agent/identity/claim/verify/%zz`, {
    headers: { accept: 'text/html,application/xhtml+xml,*/*;q=0.8' },
  });
  t.equal(res.status, 400);
  t.match(res.headers.get('content-type'), /text\/html/);
  t.match(await res.text(), /not correctly percent-encoded/);
});

t.test('HTTP that does not parse: our shape, chosen by the request line when there is one', async (t) => {
  const agent = await raw('GET /api/agent/v1/me HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n');
  t.equal(agent.status, 400);
  t.match(JSON.parse(agent.body), { code: 'invalid_request', next_action: 'fix_request' });
  const junk = await raw('HELLO THERE\r\n\r\n');
  t.equal(junk.status, 400);
  t.same(JSON.parse(junk.body), { error: 'invalid_request', status: 400, message: 'The request is not valid HTTP.' });
  const huge = await raw(`GET /api/companies HTTP/1.1\r\nHost: x\r\nx-big: ${'a'.repeat(20_000)}\r\n\r\n`);
  t.equal(huge.status, 431);
  t.match(JSON.parse(huge.body), {
    error: 'invalid_request',
    status: 431,
    message: 'The request headers are too large.',
  });
});

t.test('an empty body is no body, also under content-type: application/json', async (t) => {
  const { createMember } = await import('../helpers/fixtures.ts');
  const { testPool } = await import('../helpers/db.ts');
  const member = await createMember(await testPool(t, databaseUrl), 'admin');
  const headers = {
    authorization: `Bearer ${member.token}`,
    'x-tenant-id': member.tenantId,
    'content-type': 'application/json',
  };
  const retired = await fetch(`${url}/api/skills/register/some-skill`, { method: 'DELETE', headers });
  t.equal(retired.status, 410, 'the route answers, not the body parser');
  t.match(await retired.json(), { error: 'legacy_skill_registration_retired' });
  const noName = await fetch(`${url}/api/tenants/`, { method: 'POST', headers });
  t.equal(noName.status, 400, 'a route that needs a body says so');
  t.match(await noName.json(), { status: 400, message: /body/ });
  const broken = await fetch(`${url}/api/tenants/`, { method: 'POST', headers, body: '{"name":' });
  t.equal(broken.status, 400, 'broken JSON is still 400');
  t.match(await broken.json(), { status: 400 });
});
