// A local Slack Web API (oauth.v2.access, chat.postMessage, auth.revoke) and
// Events API requests signed like Slack's (v0 signature, timestamp).
import type { Test } from 'tap';
import { slackSignature } from '../../core/channels/slack.ts';
import { startFakeServer, type Scripted } from './channel-servers.ts';

export async function startSlackServer(
  t: Test,
  app = { clientId: '1111.2222', clientSecret: 'slack-client-secret-1', signingSecret: 'slack-signing-secret-1' },
) {
  const state = {
    codes: new Set<string>(),
    tokens: new Set<string>(),
    posted: [] as Array<{ channel: string; text: string }>,
    postScript: [] as Scripted[],
    revoked: [] as string[],
  };
  const { url } = await startFakeServer(t, async (req) => {
    const method = req.path.replace(/^\//, '');
    const bearer = String(req.headers.authorization ?? '').replace(/^Bearer /, '');
    if (method === 'oauth.v2.access') {
      const form = new URLSearchParams(req.raw);
      if (form.get('client_id') !== app.clientId || form.get('client_secret') !== app.clientSecret)
        return { body: { ok: false, error: 'invalid_client_id' } };
      const code = form.get('code') ?? '';
      if (!state.codes.delete(code)) return { body: { ok: false, error: 'invalid_code' } };
      const token = `xoxb-${code}`;
      state.tokens.add(token);
      return {
        body: {
          ok: true,
          access_token: token,
          token_type: 'bot',
          bot_user_id: 'UBOT',
          team: { id: 'T123', name: 'Test team' },
        },
      };
    }
    if (!state.tokens.has(bearer)) return { body: { ok: false, error: 'invalid_auth' } };
    if (method === 'chat.postMessage') {
      const scripted = state.postScript.shift();
      if (scripted) return scripted;
      const body = JSON.parse(req.raw) as { channel: string; text: string };
      return {
        body: { ok: true, channel: body.channel, ts: `${Date.now() / 1000}` },
        onDelivered: () => state.posted.push(body),
      };
    }
    if (method === 'auth.revoke') {
      state.tokens.delete(bearer);
      state.revoked.push(bearer);
      return { body: { ok: true, revoked: true } };
    }
    return { status: 404, body: { ok: false, error: 'unknown_method' } };
  });

  /** Headers of a request signed like Slack's Events API. */
  function sign(raw: string, nowMs = Date.now(), secret = app.signingSecret) {
    const ts = String(Math.floor(nowMs / 1000));
    return {
      'content-type': 'application/json',
      'x-slack-request-timestamp': ts,
      'x-slack-signature': slackSignature(secret, ts, raw),
    };
  }
  return { url, app, state, sign };
}
