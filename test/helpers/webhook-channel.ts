// A linked and enabled webhook channel for a tenant (the flow of
// test/api/routes/channels/webhook.test.ts, without its checks), and a way to
// send it signed inbound messages. Needs a worker running (the link job).
import type { FastifyInstance } from 'fastify';
import { signWebhook } from '../../core/channels/webhook.ts';
import { waitFor } from './wait.ts';

export async function linkWebhookChannel(
  api: { app: FastifyInstance; url: string; config: { baseUrl: string } },
  headers: Record<string, string>,
  receiver: { url: string },
  secret: string,
  conversation = 'conv-1',
) {
  const { app } = api;
  const saved = await app.inject({
    method: 'POST',
    url: '/api/channels/webhook/config',
    headers,
    payload: { callbackUrl: receiver.url, signingSecret: secret },
  });
  if (saved.statusCode !== 200) throw new Error(`webhook config: ${saved.statusCode} ${saved.body}`);
  // BASE_URL of the test config is not where the test server listens.
  const inboundUrl = (saved.json().inboundUrl as string).replace(api.config.baseUrl, api.url);
  const inbound = (body: Record<string, unknown>) => {
    const raw = JSON.stringify(body);
    return fetch(inboundUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...signWebhook(secret, raw) },
      body: raw,
    });
  };
  const { jobId, sessionToken } = (
    await app.inject({ method: 'POST', url: '/api/channels/webhook/link', headers })
  ).json();
  await waitFor(
    'the link job to wait for the binding',
    async () =>
      (await app.inject({ url: `/api/channels/webhook/jobs/${jobId}`, headers })).json().progress?.stage ===
      'awaiting_binding',
  );
  await inbound({ id: `bind-${conversation}`, from: { id: conversation, name: 'Alice' }, sessionToken });
  await waitFor(
    'the link job',
    async () =>
      (await app.inject({ url: `/api/channels/webhook/jobs/${jobId}`, headers })).json().status === 'succeeded',
  );
  await app.inject({ method: 'POST', url: '/api/channels/webhook/enable', headers });
  let n = 0;
  /** Sends a message from the bound conversation; answers the inbound route's JSON. */
  const say = async (text: string) =>
    (await (await inbound({ id: `m-${++n}-${Date.now()}`, from: { id: conversation }, text })).json()) as {
      status: string;
      jobId: string | null;
    };
  return { say };
}
