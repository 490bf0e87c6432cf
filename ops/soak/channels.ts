// Webhook-channel traffic, as a tenant's own system makes it: each channel
// tenant links one conversation, then sends signed inbound messages one after
// another (re-signed and retried with the same message id until answered, a
// fifth repeated on purpose afterwards). Replies arrive at a receiver in this
// process, which refuses a tenth of first arrivals with 503 + Retry-After, as
// a busy system would, so the reply jobs' retries are part of the soak.
import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { signWebhook } from '../../core/channels/webhook.ts';
import { RawBody, type SoakClient } from './client.ts';
import type { SoakTenant } from './seed.ts';

export type ChannelTenant = { tenant: SoakTenant; conversation: string; secret: string; inboundPath: string };
/** An inbound message the platform accepted as a turn (its first answer). */
export type Inbound = { tenantId: string; conversation: string; messageId: string; jobId: string; order: number };
/** One arrival at the receiver (a redelivered reply arrives again with its Idempotency-Key). */
export type Arrival = { key: string; to: string; text: string; refused: boolean };

export class ChannelWorkload {
  readonly inbound: Inbound[] = [];
  /** A repeated message id whose answer named another turn (or none). */
  readonly repeats: Array<{ messageId: string; same: boolean; first: string; again: string }> = [];
  readonly unanswered = new Map<string, number>();
  readonly arrivals: Arrival[] = [];
  private chains = new Map<string, Promise<void>>();
  private orders = new Map<string, number>();
  private server: Server | null = null;
  private seen = new Set<string>();

  constructor(
    private readonly client: SoakClient,
    private readonly random: () => number,
  ) {}

  /** The reply receiver on 127.0.0.1; answers its URL. */
  async listen(): Promise<string> {
    this.server = createServer((req, res) => {
      let body = '';
      req.setEncoding('utf8');
      req.on('data', (c: string) => (body += c));
      req.on('end', () => {
        const key = String(req.headers['idempotency-key'] ?? '');
        const reply = JSON.parse(body || '{}') as { to?: string; text?: string };
        const first = !this.seen.has(key);
        const refuse = first && this.random() < 0.1;
        if (!refuse) this.seen.add(key);
        this.arrivals.push({ key, to: String(reply.to), text: String(reply.text ?? ''), refused: refuse });
        if (refuse) res.writeHead(503, { 'retry-after': '1' }).end('busy');
        else res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ id: `rcv-${key}` }));
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  /** Configures, links (the first message carries the session token) and enables one tenant's webhook channel. */
  async link(tenant: SoakTenant, receiverUrl: string, index: number): Promise<ChannelTenant> {
    const headers = { authorization: `Bearer ${await tenant.token()}`, 'x-tenant-id': tenant.tenantId };
    const secret = `soak-channel-secret-${index}-${randomUUID()}`;
    const deadline = () => Date.now() + 60_000;
    const config = await this.client.until('POST', '/api/channels/webhook/config', {
      headers,
      body: { callbackUrl: `${receiverUrl}/replies/${index}`, signingSecret: secret },
      deadline: deadline(),
    });
    if (config?.status !== 200)
      throw new Error(`soak: configuring a webhook channel answered ${config?.status}: ${config?.body}`);
    const inboundPath = new URL((JSON.parse(config.body) as { inboundUrl: string }).inboundUrl).pathname;
    const link = await this.client.until('POST', '/api/channels/webhook/link', { headers, deadline: deadline() });
    if (link?.status !== 202 && link?.status !== 200)
      throw new Error(`soak: linking a webhook channel answered ${link?.status}: ${link?.body}`);
    const { sessionToken } = JSON.parse(link.body) as { sessionToken: string };
    const channel: ChannelTenant = { tenant, conversation: `conversation-${index}`, secret, inboundPath };
    for (const until = deadline(); ; ) {
      const bound = await this.post(
        channel,
        { id: `bind-${randomUUID()}`, from: { id: channel.conversation }, sessionToken },
        until,
      );
      if (bound?.status !== 200)
        throw new Error(`soak: binding a webhook channel answered ${bound?.status}: ${bound?.body}`);
      const waited = await this.client.until('GET', '/api/channels/webhook/link/wait?timeout=10', {
        headers,
        deadline: until,
      });
      const state = waited?.status === 200 ? (JSON.parse(waited.body) as { status: string }).status : null;
      if (state === 'linked') break;
      // The link job may still be registering (not yet waiting for the binding): send it again.
      if (Date.now() > until)
        throw new Error(`soak: a webhook channel was not linked in time (${waited?.status}: ${waited?.body})`);
    }
    const enabled = await this.client.until('POST', '/api/channels/webhook/enable', { headers, deadline: deadline() });
    if (enabled?.status !== 200)
      throw new Error(`soak: enabling a webhook channel answered ${enabled?.status}: ${enabled?.body}`);
    return channel;
  }

  /** Queues one inbound message; a conversation's messages are sent one after another. */
  send(channel: ChannelTenant): void {
    const previous = this.chains.get(channel.conversation) ?? Promise.resolve();
    this.chains.set(
      channel.conversation,
      previous.then(() => this.sendNow(channel)).catch(() => undefined),
    );
  }

  private async sendNow(channel: ChannelTenant): Promise<void> {
    const order = (this.orders.get(channel.conversation) ?? 0) + 1;
    const message = { id: `msg-${randomUUID()}`, from: { id: channel.conversation }, text: `channel message ${order}` };
    const answer = await this.post(channel, message, Date.now() + 120_000);
    type Received = { duplicate: boolean; status: string; jobId: string | null };
    const received = answer?.status === 200 ? (JSON.parse(answer.body) as Received) : null;
    if (!received?.jobId) {
      const why = answer ? `${answer.status} ${answer.body.slice(0, 120)}` : 'unreachable';
      this.unanswered.set(why, (this.unanswered.get(why) ?? 0) + 1);
      return;
    }
    this.orders.set(channel.conversation, order);
    this.inbound.push({
      tenantId: channel.tenant.tenantId,
      conversation: channel.conversation,
      messageId: message.id,
      jobId: received.jobId,
      order,
    });
    if (this.random() < 0.2) {
      const again = await this.post(channel, message, Date.now() + 120_000);
      const repeated = again?.status === 200 ? (JSON.parse(again.body) as Received) : null;
      this.repeats.push({
        messageId: message.id,
        same: repeated?.duplicate === true && repeated.jobId === received.jobId,
        first: answer!.body,
        again: `${again?.status} ${again?.body}`,
      });
    }
  }

  /** POSTs a message signed now (again on every attempt: the signature is timed) until it is answered. */
  private async post(channel: ChannelTenant, message: object, deadline: number) {
    for (;;) {
      const raw = JSON.stringify(message);
      const answer = await this.client.request('POST', channel.inboundPath, {
        headers: { 'content-type': 'application/json', ...signWebhook(channel.secret, raw) },
        body: new RawBody(raw),
      });
      if ((answer && answer.status !== 503 && answer.status !== 429) || Date.now() > deadline) return answer;
      await new Promise((r) => setTimeout(r, 300));
    }
  }

  async settle(): Promise<void> {
    await Promise.all(this.chains.values());
  }

  close(): void {
    this.server?.close();
    this.server?.closeAllConnections();
  }
}
