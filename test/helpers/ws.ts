// A websocket client that queues what it receives, so a test can await the
// next message that matches.
import WebSocket from 'ws';

export type Received = { type: string; [key: string]: unknown };

export class TestSocket {
  readonly messages: Received[] = [];
  private waiters: Array<{ match: (m: Received) => boolean; resolve: (m: Received) => void }> = [];
  closed: Promise<{ code: number; reason: string }>;
  opened: Promise<void>;

  constructor(readonly ws: WebSocket) {
    ws.on('message', (data) => {
      const message = JSON.parse(String(data)) as Received;
      this.messages.push(message);
      this.waiters = this.waiters.filter((w) => {
        if (!w.match(message)) return true;
        w.resolve(message);
        return false;
      });
    });
    this.closed = new Promise((resolve) => ws.on('close', (code, reason) => resolve({ code, reason: String(reason) })));
    this.opened = new Promise((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
      ws.once('unexpected-response', (_req, res) => reject(new Error(`upgrade refused: ${res.statusCode}`)));
    });
  }

  static async connect(url: string, token?: string): Promise<TestSocket> {
    const socket = new TestSocket(new WebSocket(url, token ? { headers: { authorization: `Bearer ${token}` } } : {}));
    await socket.opened;
    return socket;
  }

  send(message: unknown) {
    this.ws.send(typeof message === 'string' ? message : JSON.stringify(message));
  }

  /** Resolves with the first message (already received or coming) that matches. */
  next(match: (m: Received) => boolean, timeoutMs = 30_000): Promise<Received> {
    const seen = this.messages.find(match);
    if (seen) {
      this.messages.splice(this.messages.indexOf(seen), 1);
      return Promise.resolve(seen);
    }
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`no matching message within ${timeoutMs} ms; got ${JSON.stringify(this.messages)}`)),
        timeoutMs,
      );
      this.waiters.push({
        match,
        resolve: (m) => {
          clearTimeout(timer);
          this.messages.splice(this.messages.indexOf(m), 1);
          resolve(m);
        },
      });
    });
  }

  close() {
    this.ws.close();
  }
}

export const isJobMessage = (jobId: string) => (m: Received) =>
  m.type === 'job' && (m.job as { id: string }).id === jobId;

type FollowedJob = { id: string; status: string; version: number; result: unknown };
const FINAL = new Set(['succeeded', 'failed', 'cancelled']);

/**
 * A client as an application would write one: it follows jobs, and when the
 * connection drops it reconnects (with backoff, until stopped) and subscribes
 * again to every job whose final state it has not read yet.
 */
export class FollowingClient {
  readonly finals = new Map<string, FollowedJob>();
  readonly errors: Received[] = [];
  /** Connections that reached "ready". */
  connections = 0;
  private ws: WebSocket | null = null;
  private stopped = false;
  private waiters: Array<() => void> = [];

  constructor(
    private readonly url: string,
    private readonly token: string,
    private readonly jobIds: readonly string[],
  ) {
    void this.run();
  }

  /** Resolves once the final state of every followed job was read. */
  async allFinal(timeoutMs: number): Promise<Map<string, FollowedJob>> {
    await this.until(() => this.jobIds.every((id) => this.finals.has(id)), timeoutMs, 'every final state');
    return this.finals;
  }

  /** Resolves once `check` holds (checked on every message and connection). */
  until(check: () => boolean, timeoutMs: number, what: string): Promise<void> {
    if (check()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () =>
          reject(
            new Error(
              `timed out after ${timeoutMs} ms waiting for ${what}; finals ${[...this.finals.keys()]}, errors ${JSON.stringify(this.errors)}`,
            ),
          ),
        timeoutMs,
      );
      const waiter = () => {
        if (!check()) return;
        clearTimeout(timer);
        this.waiters = this.waiters.filter((w) => w !== waiter);
        resolve();
      };
      this.waiters.push(waiter);
    });
  }

  stop() {
    this.stopped = true;
    this.ws?.terminate();
  }

  private async run() {
    let delay = 100;
    while (!this.stopped) {
      const closed = await this.connectOnce().catch(() => false);
      if (this.stopped) return;
      if (closed) delay = 100; // it was up: start the backoff again
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 1_000);
    }
  }

  /** One connection, until it closes; false when it never opened. */
  private connectOnce(): Promise<boolean> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(this.url, { headers: { authorization: `Bearer ${this.token}` } });
      this.ws = ws;
      let opened = false;
      ws.once('open', () => (opened = true));
      ws.on('error', () => undefined); // 'close' follows, or the refusal below
      ws.once('unexpected-response', (_req, res) => {
        res.resume();
        ws.terminate();
        reject(new Error(`upgrade refused: ${res.statusCode}`));
      });
      ws.once('close', () => resolve(opened));
      ws.on('message', (data) => this.onMessage(ws, JSON.parse(String(data)) as Received));
    });
  }

  private subscribe(ws: WebSocket, jobId: string) {
    if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ type: 'subscribe', jobId }));
  }

  private onMessage(ws: WebSocket, message: Received) {
    if (message.type === 'ready') {
      this.connections++;
      for (const id of this.jobIds) if (!this.finals.has(id)) this.subscribe(ws, id);
    } else if (message.type === 'job') {
      const job = message.job as FollowedJob;
      if (FINAL.has(job.status)) this.finals.set(job.id, job);
    } else if (message.type === 'error') {
      this.errors.push(message);
      // The protocol says: an unavailable subscribe is to be sent again.
      if (message.code === 'unavailable' && typeof message.jobId === 'string') {
        const jobId = message.jobId;
        setTimeout(() => this.subscribe(ws, jobId), 500);
      }
    }
    for (const waiter of [...this.waiters]) waiter();
  }
}
