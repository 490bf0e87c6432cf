// A tenant's system receiving webhook-channel replies: checks our signature
// and records each reply it acknowledged.
import type { Test } from 'tap';
import { webhookSignature } from '../../core/channels/webhook.ts';
import { startFakeServer, type Scripted } from './channel-servers.ts';

export type Reply = { id: string; to: string; text: string; idempotencyKey: string };

export async function startWebhookReceiver(t: Test, secret: string) {
  const state = { replies: [] as Reply[], badSignatures: 0, script: [] as Scripted[] };
  const { url } = await startFakeServer(t, async (req) => {
    const ts = String(req.headers['x-webhook-timestamp'] ?? '');
    if (req.headers['x-webhook-signature'] !== webhookSignature(secret, ts, req.raw)) {
      state.badSignatures++;
      return { status: 401, body: { error: 'bad signature' } };
    }
    const scripted = state.script.shift();
    if (scripted) return scripted;
    const body = JSON.parse(req.raw) as Omit<Reply, 'idempotencyKey'>;
    return {
      body: { id: `r-${body.id}` },
      onDelivered: () => state.replies.push({ ...body, idempotencyKey: String(req.headers['idempotency-key']) }),
    };
  });
  return { url: `${url}/replies`, state };
}
