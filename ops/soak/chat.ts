// Chat sends across many tenants and sessions, as clients make them: each
// with its own Idempotency-Key, retried with the same key while no answer
// comes (an api killed, PostgreSQL away), a quarter replayed on purpose after
// the answer; sends to one session follow each other (follow-ups), without
// waiting for the answers. Jobs are followed over websockets (followers.ts)
// or polled here, and every observation is kept for the invariants.
import { randomUUID } from 'node:crypto';
import { isFinal } from '../../core/jobs/schema.ts';
import type { SoakClient } from './client.ts';
import type { SoakTenant } from './seed.ts';

/** An accepted send; `sentAt` is when the attempt that was accepted left, `acceptedAt` when its 202 came. */
export type Sent = {
  tenantId: string;
  sessionId: string;
  key: string;
  jobId: string;
  messageId: string;
  body: string;
  order: number;
  sentAt: number;
  acceptedAt: number;
};
export type Replay = { key: string; route: string; same: boolean; first: string; again: string };
/** What a client last saw of a job it polled: its final state, once it had one. */
export type Seen = { status: string; version: number };

export class ChatWorkload {
  readonly sent: Sent[] = [];
  readonly replays: Replay[] = [];
  readonly refused = new Map<string, number>();
  readonly polledFinal = new Map<string, Seen>();
  /** A poll that saw a final job change afterwards. */
  readonly changedAfterFinal: Array<{ jobId: string; before: Seen; after: Seen }> = [];
  private chains = new Map<string, Promise<void>>();
  private orders = new Map<string, number>();
  private polls = new Set<Promise<void>>();
  private stopped = false;

  constructor(
    private readonly client: SoakClient,
    private readonly onSent: (tenant: SoakTenant, sent: Sent) => void,
  ) {}

  /** Queues one send to a session; sends to the same session are accepted in order. */
  send(tenant: SoakTenant, sessionId: string, random: () => number): void {
    const previous = this.chains.get(sessionId) ?? Promise.resolve();
    const next = previous.then(() => this.sendNow(tenant, sessionId, random)).catch(() => undefined);
    this.chains.set(sessionId, next);
  }

  private async sendNow(tenant: SoakTenant, sessionId: string, random: () => number): Promise<void> {
    const key = `soak-${randomUUID()}`;
    const order = (this.orders.get(sessionId) ?? 0) + 1;
    // The workspace's Admin or its Member (joined by invitation): both chat.
    const token = random() < 0.5 ? tenant.token() : tenant.memberToken();
    const headers = { authorization: `Bearer ${await token}`, 'x-tenant-id': tenant.tenantId, 'idempotency-key': key };
    const body = { sessionId, message: `message ${order} of ${sessionId.slice(0, 8)}` };
    const answer = await this.client.until('POST', '/api/chat/send', { headers, body, deadline: Date.now() + 120_000 });
    if (answer?.status !== 202) {
      const why = answer ? String(answer.status) : 'unreachable';
      this.refused.set(why, (this.refused.get(why) ?? 0) + 1);
      return;
    }
    this.orders.set(sessionId, order);
    const { jobId, messageId } = JSON.parse(answer.body) as { jobId: string; messageId: string };
    const sent: Sent = {
      tenantId: tenant.tenantId,
      sessionId,
      key,
      jobId,
      messageId,
      body: answer.body,
      order,
      sentAt: answer.sentAt,
      acceptedAt: Date.now(),
    };
    this.sent.push(sent);
    this.onSent(tenant, sent);
    if (random() < 0.25) {
      const again = await this.client.until('POST', '/api/chat/send', {
        headers,
        body,
        deadline: Date.now() + 120_000,
      });
      if (again)
        this.replays.push({
          key,
          route: 'POST /api/chat/send',
          same: again.status === 202 && again.body === answer.body,
          first: answer.body,
          again: `${again.status} ${again.body}`,
        });
    }
    if (random() < 0.3) this.poll(tenant, jobId);
  }

  /** Polls a job until it is final, then once more: a final job must not change. */
  private poll(tenant: SoakTenant, jobId: string): void {
    const run = (async () => {
      const deadline = Date.now() + 300_000;
      let final: Seen | null = null;
      while (Date.now() < deadline && !this.stopped) {
        const answer = await this.client.request('GET', `/api/jobs/${jobId}`, {
          headers: { authorization: `Bearer ${await tenant.token()}` },
        });
        if (answer?.status === 200) {
          const job = JSON.parse(answer.body) as Seen;
          if (final) {
            if (job.version !== final.version || job.status !== final.status)
              this.changedAfterFinal.push({ jobId, before: final, after: job });
            return;
          }
          if (isFinal(job.status)) {
            final = { status: job.status, version: job.version };
            this.polledFinal.set(jobId, final);
          }
        }
        await new Promise((r) => setTimeout(r, final ? 1_000 : 500));
      }
    })();
    this.polls.add(run);
    void run.finally(() => this.polls.delete(run));
  }

  /** Every queued send answered (or given up) and every poll ended. */
  async settle(): Promise<void> {
    await Promise.all(this.chains.values());
    this.stopped = true;
    await Promise.all(this.polls);
  }
}
