// Websocket followers: one connection per tenant, to whichever api is up,
// following the tenant's jobs to their final state. A connection that drops
// (its api killed, PostgreSQL away) is opened again to an api that is up and
// subscribes again to every job not yet final, as the protocol asks; each job
// state received is recorded, so the invariants can check that the final
// state arrived, that states never went backwards, and that nothing changed
// after the final one.
import WebSocket from 'ws';
import { isFinal } from '../../core/jobs/schema.ts';
import type { SoakTenant } from './seed.ts';

export type Observed = { status: string; version: number };
export type Followed = { tenantId: string; states: Observed[]; final: Observed | null; afterFinal: Observed[] };

export class Followers {
  readonly jobs = new Map<string, Followed>();
  reconnects = 0;
  private sockets = new Map<string, WebSocket>();
  private stopped = false;

  readonly errors = new Map<string, number>();

  constructor(private readonly ports: () => number[]) {}

  follow(tenant: SoakTenant, jobId: string): void {
    this.jobs.set(jobId, { tenantId: tenant.tenantId, states: [], final: null, afterFinal: [] });
    const ws = this.sockets.get(tenant.tenantId);
    if (ws?.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ type: 'subscribe', jobId }));
    else if (!ws) void this.connect(tenant);
  }

  private async connect(tenant: SoakTenant): Promise<void> {
    if (this.stopped) return;
    const ports = this.ports();
    const port = ports[Math.floor(Math.random() * ports.length)];
    if (port === undefined) return void setTimeout(() => void this.connect(tenant), 500);
    const ws = new WebSocket(`ws://127.0.0.1:${port}/api/ws`, {
      headers: { authorization: `Bearer ${await tenant.token()}` },
    });
    this.sockets.set(tenant.tenantId, ws);
    ws.on('open', () => {
      for (const [jobId, job] of this.jobs)
        if (job.tenantId === tenant.tenantId && !job.final) ws.send(JSON.stringify({ type: 'subscribe', jobId }));
    });
    ws.on('message', (data) => this.receive(ws, String(data)));
    ws.on('error', () => undefined); // 'close' follows
    ws.on('close', () => {
      if (this.sockets.get(tenant.tenantId) !== ws || this.stopped) return;
      this.reconnects++;
      setTimeout(() => void this.connect(tenant), 300);
    });
  }

  private receive(ws: WebSocket, text: string): void {
    const message = JSON.parse(text) as {
      type: string;
      jobId?: string;
      code?: string;
      job?: { id: string; status: string; version: number };
    };
    if (message.type === 'error' && message.jobId && message.code === 'unavailable') {
      // The api could not read the job (PostgreSQL away): ask again in a moment.
      const jobId = message.jobId;
      setTimeout(
        () => ws.readyState === WebSocket.OPEN && ws.send(JSON.stringify({ type: 'subscribe', jobId })),
        1_000,
      );
      return;
    }
    if (message.type === 'error')
      this.errors.set(message.code ?? 'error', (this.errors.get(message.code ?? 'error') ?? 0) + 1);
    if (message.type !== 'job' || !message.job) return;
    const followed = this.jobs.get(message.job.id);
    if (!followed) return;
    const state = { status: message.job.status, version: message.job.version };
    if (followed.final) {
      // A resubscription repeats the final state; anything else is a change after it.
      if (state.version !== followed.final.version || state.status !== followed.final.status)
        followed.afterFinal.push(state);
      return;
    }
    followed.states.push(state);
    if (isFinal(state.status)) followed.final = state;
  }

  /** Jobs followed that have not reached their final state yet. */
  pending(): number {
    let n = 0;
    for (const job of this.jobs.values()) if (!job.final) n++;
    return n;
  }

  close(): void {
    this.stopped = true;
    for (const ws of this.sockets.values()) ws.close();
  }
}
