// The Agent API's shared admission limit and the agent-auth kill switch.
import t from 'tap';
import { createRegistration } from '../../../core/identity/registrations.ts';
import { buildTestApp } from '../../helpers/app.ts';
import { agentAccessToken } from '../../helpers/principals.ts';
import { createTestDatabase } from '../../helpers/db.ts';

const databaseUrl = await createTestDatabase(t);

async function tokenFor(api: Awaited<ReturnType<typeof buildTestApp>>) {
  const { registration } = await createRegistration(api.db, {
    type: 'anonymous',
    ip: '127.0.0.1',
    claimTokenTtlS: 3600,
  });
  return agentAccessToken(api.app, api.config, registration, ['svc:boards:read']);
}

t.test('over the per-principal limit: 429, Retry-After, SharedRateLimitError; others unaffected', async (t) => {
  const api = await buildTestApp(t, databaseUrl, { AGENT_API_RATE_LIMIT: '3', AGENT_API_RATE_WINDOW_MS: '60000' });
  const [a, b] = [await tokenFor(api), await tokenFor(api)];
  const me = (token: string) =>
    api.app.inject({ url: '/api/agent/v1/me', headers: { authorization: `Bearer ${token}` } });
  for (let i = 0; i < 3; i++) t.equal((await me(a)).statusCode, 200);
  const refused = await me(a);
  t.equal(refused.statusCode, 429);
  t.match(refused.json(), {
    code: 'rate_limit_exceeded',
    next_action: 'retry_same_request_later',
    limit: 3,
    window_seconds: 60,
  });
  const retryAfter = Number(refused.headers['retry-after']);
  t.ok(Number.isInteger(retryAfter) && retryAfter >= 0 && retryAfter <= 60, `Retry-After ${retryAfter}`);
  t.equal(refused.json().retry_after, retryAfter);
  t.equal((await me(b)).statusCode, 200, 'another principal has its own budget');
  t.equal((await api.app.inject('/healthz')).statusCode, 200, 'other surfaces are not limited');
  const doc = (await api.app.inject('/openapi.json')).json();
  t.ok(doc.components.schemas.SharedRateLimitError, 'SharedRateLimitError is published');
});

t.test('agent authentication switched off: 503 temporarily_disabled', async (t) => {
  const api = await buildTestApp(t, databaseUrl, { AGENT_AUTH_DISABLED: 'true' });
  const res = await api.app.inject({
    url: '/api/agent/v1/capabilities',
    headers: { authorization: `Bearer ${await tokenFor(api)}` },
  });
  t.equal(res.statusCode, 503);
  t.match(res.json(), { code: 'temporarily_disabled', next_action: 'retry_later' });
  // The router decodes paths: encoded spellings reach the same routes and get the same answer.
  for (const url of ['/api/agent/%761/capabilities', '/api/%61gent/v1/me', '/m%63p']) {
    const encoded = await api.app.inject({
      method: url === '/m%63p' ? 'POST' : 'GET',
      url,
      headers: { authorization: `Bearer ${await tokenFor(api)}` },
    });
    t.equal(encoded.statusCode, 503, url);
    t.match(encoded.json(), { code: 'temporarily_disabled' }, `${url} in the agent error shape`);
  }
});
