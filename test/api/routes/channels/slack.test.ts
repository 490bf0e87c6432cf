// Slack against a local Web API: the OAuth v2 install (the redirect's code
// exchanged by the link job with oauth.v2.access), URL verification, signed
// Events API requests (tampered, unsigned, stale refused), a turn answered
// with chat.postMessage once, and auth.revoke on disconnect.
import t from 'tap';
import { sql } from '../../../../core/db/pool.ts';
import { startTestServer } from '../../../helpers/app.ts';
import { createTestDatabase } from '../../../helpers/db.ts';
import { createMember } from '../../../helpers/fixtures.ts';
import { startSlackServer } from '../../../helpers/slack-server.ts';
import { waitFor } from '../../../helpers/wait.ts';
import { startTestWorker } from '../../../helpers/worker.ts';
import { z } from 'zod';

const slack = await startSlackServer(t);
const databaseUrl = await createTestDatabase(t);
const overrides = { SLACK_API_BASE: slack.url, SLACK_AUTHORIZE_URL: `${slack.url}/oauth/v2/authorize` };
const api = await startTestServer(t, databaseUrl, overrides);
const { app, db } = api;
await startTestWorker(t, databaseUrl, overrides);
const member = await createMember(db, 'admin');
const headers = { authorization: `Bearer ${member.token}`, 'x-tenant-id': member.tenantId };
let events = '';
const post = (body: unknown, sign: (raw: string) => Record<string, string> = (raw) => slack.sign(raw)) => {
  const raw = JSON.stringify(body);
  return fetch(events, { method: 'POST', headers: { 'content-type': 'application/json', ...sign(raw) }, body: raw });
};
const event = (id: string, text: string) => ({
  type: 'event_callback',
  team_id: 'T123',
  event_id: id,
  event: { type: 'message', channel: 'C1', user: 'U1', text },
});

t.test('install: link URL, OAuth redirect, code exchanged by the link job', async (t) => {
  const saved = (
    await app.inject({ method: 'POST', url: '/api/channels/slack/config', headers, payload: slack.app })
  ).json();
  t.notMatch(JSON.stringify(saved), slack.app.clientSecret);
  t.notMatch(JSON.stringify(saved), slack.app.signingSecret);
  events = saved.inboundUrl.replace(api.config.baseUrl, api.url);
  const challenge = await (await post({ type: 'url_verification', challenge: 'abc123' })).json();
  t.same(challenge, { challenge: 'abc123' }, 'URL verification');
  const started = (await app.inject({ method: 'POST', url: '/api/channels/slack/link', headers })).json();
  const install = new URL(started.linkUrl);
  t.equal(install.searchParams.get('client_id'), slack.app.clientId);
  t.equal(install.searchParams.get('redirect_uri'), `${api.config.baseUrl}/api/channels/slack/oauth/callback`);
  slack.state.codes.add('code-1');
  const back = await app.inject({
    url: `/api/channels/slack/oauth/callback?code=code-1&state=${install.searchParams.get('state')}`,
  });
  t.equal(back.statusCode, 200);
  t.equal(
    (
      await app.inject({
        url: `/api/channels/slack/oauth/callback?code=code-1&state=${install.searchParams.get('state')}`,
      })
    ).statusCode,
    400,
    'a state is used once',
  );
  const job = await waitFor('the link job', async () => {
    const j = (await app.inject({ url: `/api/channels/slack/jobs/${started.jobId}`, headers })).json();
    return j.status === 'succeeded' || j.status === 'failed' ? j : null;
  });
  t.match(job, { status: 'succeeded', result: { state: 'linked', account: { teamId: 'T123' } } });
  t.equal((await app.inject({ method: 'POST', url: '/api/channels/slack/enable', headers })).json().status, 'enabled');
});

t.test('signatures: tampered, unsigned, stale and wrong-key requests refused, nothing stored', async (t) => {
  const body = event('Ev0', 'hi');
  const results = await Promise.all([
    post(body, (raw) => slack.sign(raw.replace('hi', 'ho'))),
    post(body, () => ({})),
    post(body, (raw) => slack.sign(raw, Date.now() - 6 * 60_000)),
    post(body, (raw) => slack.sign(raw, Date.now(), 'another-signing-secret')),
  ]);
  t.same(
    results.map((r) => r.status),
    [401, 401, 401, 401],
  );
  t.equal(await db.oneFirst(sql.type(z.object({ n: z.number() }))`select count(*)::int as n from channel_updates`), 0);
});

t.test('an event becomes one turn, answered with chat.postMessage once', async (t) => {
  const first = await (await post(event('Ev1', 'Hello Slack'))).json();
  t.match(first, { status: 'turn', duplicate: false });
  t.match(
    await (await post(event('Ev1', 'Hello Slack'))).json(),
    { duplicate: true, jobId: first.jobId },
    'a retried event: the same turn',
  );
  await waitFor('the reply', async () => slack.state.posted.length === 1);
  const answer = await db.oneFirst(
    sql.type(z.object({ content: z.string() }))`select content from chat_messages where job_id = ${first.jobId}`,
  );
  t.same(slack.state.posted, [{ channel: 'C1', text: answer }]);
});

t.test('disconnect revokes the bot token', async (t) => {
  t.equal((await app.inject({ method: 'POST', url: '/api/channels/slack/disconnect', headers })).statusCode, 202);
  t.equal((await post(event('Ev2', 'hi'))).status, 404);
  await waitFor('auth.revoke', async () => slack.state.revoked.length === 1);
  t.equal(slack.state.revoked[0], 'xoxb-code-1');
});
